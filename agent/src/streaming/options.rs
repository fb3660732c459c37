//! What a streaming request asks for (the kubelet's `/exec`, `/attach`, `/portForward`
//! query) and which wire protocol answers it. Pure: no IO.

use http::HeaderMap;

/// Query options of exec and attach, as kubectl sends them
/// (`command=..&command=..&container=..&stdin=true&stdout=true&tty=true`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OptionsError {
    #[error("you must specify at least 1 of stdin, stdout, stderr")]
    NoStreams,
    #[error("you must specify a command")]
    NoCommand,
    #[error("invalid port {0:?}: must be an integer in 1..65535")]
    BadPort(String),
}

fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "True" | "TRUE" | "")
}

impl ExecOptions {
    /// Parses the query; `exec` requires a command, attach does not.
    pub fn parse(query: Option<&str>, needs_command: bool) -> Result<Self, OptionsError> {
        let mut o = ExecOptions::default();
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match k.as_ref() {
                "command" => o.command.push(v.into_owned()),
                "input" | "stdin" => o.stdin = truthy(&v),
                "output" | "stdout" => o.stdout = truthy(&v),
                "error" | "stderr" => o.stderr = truthy(&v),
                "tty" => o.tty = truthy(&v),
                _ => {}
            }
        }
        if !(o.stdin || o.stdout || o.stderr) {
            return Err(OptionsError::NoStreams);
        }
        if needs_command && o.command.is_empty() {
            return Err(OptionsError::NoCommand);
        }
        // With a terminal, stderr is the terminal too (as the kubelet answers).
        if o.tty {
            o.stderr = false;
        }
        Ok(o)
    }
}

/// Ports of a websocket port-forward (`?ports=8080,9090`); SPDY carries them per stream.
pub fn parse_ports(query: Option<&str>) -> Result<Vec<u16>, OptionsError> {
    let mut ports = Vec::new();
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if k == "ports" {
            for p in v.split(',').filter(|p| !p.is_empty()) {
                ports.push(parse_port(p)?);
            }
        }
    }
    Ok(ports)
}

pub fn parse_port(p: &str) -> Result<u16, OptionsError> {
    p.trim()
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| OptionsError::BadPort(p.to_string()))
}

/// The wire protocol a client asked for and the server chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wire {
    /// `Upgrade: websocket` with a `*.channel.k8s.io` subprotocol (exec, attach).
    WebSocket { protocol: String },
    /// `Upgrade: SPDY/3.1` with `X-Stream-Protocol-Version` (exec, attach, port-forward).
    Spdy { protocol: String },
    /// Port-forward over SPDY tunnelled in websocket frames (kubectl 1.31+).
    SpdyOverWebSocket { protocol: String },
    /// Port-forward over the websocket channel protocol (two channels per port, as the
    /// kubelet serves it: the official Python client's `portforward()`).
    PortForwardChannels { protocol: String },
}

/// Whether a websocket channel protocol carries base64 text messages with the channel as
/// an ASCII digit (`base64.channel.k8s.io`, `v4.base64.channel.k8s.io`) instead of binary.
pub fn is_base64(protocol: &str) -> bool {
    protocol.contains("base64.")
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NegotiateError {
    #[error("unable to upgrade: missing upgrade headers in request")]
    NotAnUpgrade,
    #[error("unable to upgrade: unsupported protocol {0:?}")]
    UnsupportedUpgrade(String),
    #[error("unable to upgrade: unable to negotiate protocol: client supports {client:?}, server supports {server:?}")]
    NoCommonProtocol {
        client: Vec<String>,
        server: Vec<&'static str>,
    },
}

/// Exec and attach protocols, best first. v1–v3 are not served (every kubectl since 1.5
/// offers v4); the base64 variants are for clients that only send text messages.
pub const EXEC_PROTOCOLS: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "base64.channel.k8s.io",
];
/// Port-forward over SPDY.
pub const PORT_FORWARD_PROTOCOLS: &[&str] = &["portforward.k8s.io"];
/// Port-forward over SPDY over websocket.
pub const TUNNEL_PROTOCOLS: &[&str] = &["SPDY/3.1+portforward.k8s.io"];
/// Port-forward over the websocket channel protocol, as the kubelet offers it.
pub const PORT_FORWARD_CHANNEL_PROTOCOLS: &[&str] =
    &["v4.channel.k8s.io", "v4.base64.channel.k8s.io"];

fn header_list(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

fn pick(client: Vec<String>, server: &[&'static str]) -> Result<String, NegotiateError> {
    server
        .iter()
        .find(|s| client.iter().any(|c| c == *s))
        .map(|s| s.to_string())
        .ok_or(NegotiateError::NoCommonProtocol {
            client,
            server: server.to_vec(),
        })
}

/// Chooses the wire for an exec/attach (`port_forward` false) or port-forward request.
pub fn negotiate(headers: &HeaderMap, port_forward: bool) -> Result<Wire, NegotiateError> {
    let upgrade = headers
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .ok_or(NegotiateError::NotAnUpgrade)?;
    if upgrade.eq_ignore_ascii_case("websocket") {
        let offered = header_list(headers, "sec-websocket-protocol");
        if port_forward {
            if let Ok(protocol) = pick(offered.clone(), TUNNEL_PROTOCOLS) {
                return Ok(Wire::SpdyOverWebSocket { protocol });
            }
            if offered.is_empty() {
                // No subprotocol: the kubelet's default, binary channels.
                return Ok(Wire::PortForwardChannels {
                    protocol: String::new(),
                });
            }
            let server = [TUNNEL_PROTOCOLS, PORT_FORWARD_CHANNEL_PROTOCOLS].concat();
            let protocol = pick(offered, &server)?;
            return Ok(Wire::PortForwardChannels { protocol });
        }
        return Ok(Wire::WebSocket {
            protocol: pick(offered, EXEC_PROTOCOLS)?,
        });
    }
    if upgrade.eq_ignore_ascii_case("SPDY/3.1") {
        let offered = header_list(headers, "x-stream-protocol-version");
        let server = if port_forward {
            PORT_FORWARD_PROTOCOLS
        } else {
            // v5 adds nothing over SPDY (streams close one by one already): answer v4;
            // base64 is a websocket matter.
            &EXEC_PROTOCOLS[1..2]
        };
        return Ok(Wire::Spdy {
            protocol: pick(offered, server)?,
        });
    }
    Err(NegotiateError::UnsupportedUpgrade(upgrade.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn exec_query_as_kubectl_sends_it() {
        let o = ExecOptions::parse(
            Some("command=sh&command=-c&command=exit%203&container=web&stdin=true&stdout=true&stderr=true"),
            true,
        )
        .unwrap();
        assert_eq!(o.command, ["sh", "-c", "exit 3"]);
        assert!(o.stdin && o.stdout && o.stderr && !o.tty);
        let t =
            ExecOptions::parse(Some("command=sh&stdin=1&stdout=1&stderr=1&tty=1"), true).unwrap();
        assert!(t.tty && !t.stderr, "a terminal carries stderr itself");
    }

    #[test]
    fn exec_query_errors() {
        assert_eq!(
            ExecOptions::parse(Some("command=ls"), true),
            Err(OptionsError::NoStreams)
        );
        assert_eq!(
            ExecOptions::parse(Some("stdout=true"), true),
            Err(OptionsError::NoCommand)
        );
        assert!(ExecOptions::parse(Some("stdout=true"), false).is_ok());
    }

    #[test]
    fn ports() {
        assert_eq!(parse_ports(Some("ports=8080,9090")).unwrap(), [8080, 9090]);
        assert_eq!(parse_ports(Some("ports=80&ports=81")).unwrap(), [80, 81]);
        assert!(parse_ports(Some("ports=0")).is_err());
        assert!(parse_ports(Some("ports=70000")).is_err());
    }

    #[test]
    fn websocket_prefers_v5() {
        let h = headers(&[
            ("upgrade", "websocket"),
            (
                "sec-websocket-protocol",
                "v4.channel.k8s.io, v5.channel.k8s.io",
            ),
        ]);
        assert_eq!(
            negotiate(&h, false).unwrap(),
            Wire::WebSocket {
                protocol: "v5.channel.k8s.io".into()
            }
        );
        let old = headers(&[
            ("upgrade", "websocket"),
            ("sec-websocket-protocol", "channel.k8s.io"),
        ]);
        assert!(matches!(
            negotiate(&old, false),
            Err(NegotiateError::NoCommonProtocol { .. })
        ));
    }

    /// The upgrade headers real clients send (captured from kubectl 1.33 and 1.27 — client-go's
    /// websocket and SPDY executors and port-forwarders — and read from the Python client's
    /// `ws_client.py`, Debian's 22.6 and PyPI's 36.0.3), and what each gets.
    #[test]
    fn captured_client_handshakes_negotiate() {
        let mut cases = kubectl_handshakes();
        cases.extend(python_client_handshakes());
        for (client, port_forward, sent, wanted) in &cases {
            assert_eq!(
                &negotiate(&headers(sent), *port_forward).unwrap(),
                wanted,
                "{client}"
            );
        }
    }

    /// Client, port-forward endpoint, upgrade headers sent, what it gets.
    type Case = (
        &'static str,
        bool,
        &'static [(&'static str, &'static str)],
        Wire,
    );

    fn kubectl_handshakes() -> Vec<Case> {
        vec![
            (
                "kubectl 1.33 exec (websocket executor)",
                false,
                &[
                    ("upgrade", "websocket"),
                    ("sec-websocket-protocol", "v5.channel.k8s.io"),
                ],
                Wire::WebSocket {
                    protocol: "v5.channel.k8s.io".into(),
                },
            ),
            (
                "kubectl 1.33 exec fallback (SPDY executor)",
                false,
                &[
                    ("upgrade", "SPDY/3.1"),
                    ("x-stream-protocol-version", "v5.channel.k8s.io"),
                    ("x-stream-protocol-version", "v4.channel.k8s.io"),
                    ("x-stream-protocol-version", "v3.channel.k8s.io"),
                    ("x-stream-protocol-version", "v2.channel.k8s.io"),
                    ("x-stream-protocol-version", "channel.k8s.io"),
                ],
                Wire::Spdy {
                    protocol: "v4.channel.k8s.io".into(),
                },
            ),
            (
                "kubectl 1.27 exec (SPDY executor)",
                false,
                &[
                    ("upgrade", "SPDY/3.1"),
                    ("x-stream-protocol-version", "v4.channel.k8s.io"),
                    ("x-stream-protocol-version", "v3.channel.k8s.io"),
                    ("x-stream-protocol-version", "v2.channel.k8s.io"),
                    ("x-stream-protocol-version", "channel.k8s.io"),
                ],
                Wire::Spdy {
                    protocol: "v4.channel.k8s.io".into(),
                },
            ),
            (
                "kubectl 1.33 port-forward (SPDY tunnelled in websocket)",
                true,
                &[
                    ("upgrade", "websocket"),
                    ("sec-websocket-protocol", "SPDY/3.1+portforward.k8s.io"),
                ],
                Wire::SpdyOverWebSocket {
                    protocol: "SPDY/3.1+portforward.k8s.io".into(),
                },
            ),
            (
                "kubectl 1.27 port-forward (SPDY)",
                true,
                &[
                    ("upgrade", "SPDY/3.1"),
                    ("x-stream-protocol-version", "portforward.k8s.io"),
                ],
                Wire::Spdy {
                    protocol: "portforward.k8s.io".into(),
                },
            ),
        ]
    }

    fn python_client_handshakes() -> Vec<Case> {
        vec![
            (
                "Python client 22.6 stream()",
                false,
                &[
                    ("upgrade", "websocket"),
                    ("sec-websocket-protocol", "v4.channel.k8s.io"),
                ],
                Wire::WebSocket {
                    protocol: "v4.channel.k8s.io".into(),
                },
            ),
            (
                "Python client 36.0.3 stream()",
                false,
                &[
                    ("upgrade", "websocket"),
                    (
                        "sec-websocket-protocol",
                        "v5.channel.k8s.io,v4.channel.k8s.io",
                    ),
                ],
                Wire::WebSocket {
                    protocol: "v5.channel.k8s.io".into(),
                },
            ),
            (
                "Python client 36.0.3 portforward()",
                true,
                &[
                    ("upgrade", "websocket"),
                    (
                        "sec-websocket-protocol",
                        "v5.channel.k8s.io,v4.channel.k8s.io",
                    ),
                ],
                Wire::PortForwardChannels {
                    protocol: "v4.channel.k8s.io".into(),
                },
            ),
        ]
    }

    #[test]
    fn base64_variants_and_websocket_port_forward_channels() {
        let ws = |offered: &str| {
            headers(&[
                ("upgrade", "websocket"),
                ("sec-websocket-protocol", offered),
            ])
        };
        assert_eq!(
            negotiate(&ws("v4.base64.channel.k8s.io"), false).unwrap(),
            Wire::WebSocket {
                protocol: "v4.base64.channel.k8s.io".into()
            }
        );
        assert!(is_base64("base64.channel.k8s.io") && !is_base64("v4.channel.k8s.io"));
        // The Python client's portforward(): v4 channels on the port-forward endpoint.
        assert_eq!(
            negotiate(&ws("v4.channel.k8s.io"), true).unwrap(),
            Wire::PortForwardChannels {
                protocol: "v4.channel.k8s.io".into()
            }
        );
        // kubectl ≥ 1.31 offers the SPDY tunnel first and gets it.
        assert!(matches!(
            negotiate(&ws("SPDY/3.1+portforward.k8s.io, v4.channel.k8s.io"), true).unwrap(),
            Wire::SpdyOverWebSocket { .. }
        ));
        let mut bare = HeaderMap::new();
        bare.insert("upgrade", "websocket".parse().unwrap());
        assert_eq!(
            negotiate(&bare, true).unwrap(),
            Wire::PortForwardChannels {
                protocol: String::new()
            }
        );
    }

    #[test]
    fn spdy_answers_v4_and_portforward() {
        let h = headers(&[
            ("upgrade", "SPDY/3.1"),
            ("x-stream-protocol-version", "v5.channel.k8s.io"),
            ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ("x-stream-protocol-version", "channel.k8s.io"),
        ]);
        assert_eq!(
            negotiate(&h, false).unwrap(),
            Wire::Spdy {
                protocol: "v4.channel.k8s.io".into()
            }
        );
        let pf = headers(&[
            ("upgrade", "SPDY/3.1"),
            ("x-stream-protocol-version", "portforward.k8s.io"),
        ]);
        assert!(matches!(negotiate(&pf, true).unwrap(), Wire::Spdy { .. }));
        let tunnel = headers(&[
            ("upgrade", "websocket"),
            ("sec-websocket-protocol", "SPDY/3.1+portforward.k8s.io"),
        ]);
        assert!(matches!(
            negotiate(&tunnel, true).unwrap(),
            Wire::SpdyOverWebSocket { .. }
        ));
        assert_eq!(
            negotiate(&HeaderMap::new(), true),
            Err(NegotiateError::NotAnUpgrade)
        );
    }
}
