//! The Prometheus text format (0.0.4) for per-scrape collectors whose samples carry their
//! own timestamps, as the kubelet's `/metrics/resource` and `/metrics/cadvisor` do.
//! `prometheus-client` (used for long-lived counters elsewhere) has no sample timestamps,
//! so this small writer exists; no IO.

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// A text exposition being written: families in order, each once.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Starts a family: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, help: &str, kind: Kind) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample of the current family, at `time` when given.
    pub fn sample(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        value: f64,
        time: Option<SystemTime>,
    ) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(label);
                self.text.push_str("=\"");
                escape_into(&mut self.text, v);
                self.text.push('"');
            }
            self.text.push('}');
        }
        self.text.push(' ');
        write_value(&mut self.text, value);
        if let Some(ms) = time.and_then(|t| t.duration_since(UNIX_EPOCH).ok()) {
            let _ = write!(self.text, " {}", ms.as_millis());
        }
        self.text.push('\n');
    }

    pub fn finish(self) -> String {
        self.text
    }
}

/// Label values escape backslash, double quote and newline. Most need none: copied as
/// they are (a scrape writes tens of thousands of them).
fn escape_into(out: &mut String, value: &str) {
    if !value.contains(['\\', '"', '\n']) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn write_value(out: &mut String, value: f64) {
    match value {
        v if v.is_nan() => out.push_str("NaN"),
        v if v == f64::INFINITY => out.push_str("+Inf"),
        v if v == f64::NEG_INFINITY => out.push_str("-Inf"),
        v => {
            let _ = write!(out, "{v}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn families_samples_labels_and_timestamps() {
        let mut out = Exposition::new();
        out.family(
            "node_cpu_usage_seconds_total",
            "Cumulative cpu time",
            Kind::Counter,
        );
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        out.sample("node_cpu_usage_seconds_total", &[], 12.5, Some(at));
        out.family("pod_memory_working_set_bytes", "Working set", Kind::Gauge);
        let labels = [("namespace", "a\"b"), ("pod", "x\\y\nz")];
        out.sample("pod_memory_working_set_bytes", &labels, 1024.0, None);
        assert_eq!(
            out.finish(),
            "# HELP node_cpu_usage_seconds_total Cumulative cpu time\n\
             # TYPE node_cpu_usage_seconds_total counter\n\
             node_cpu_usage_seconds_total 12.5 1700000000123\n\
             # HELP pod_memory_working_set_bytes Working set\n\
             # TYPE pod_memory_working_set_bytes gauge\n\
             pod_memory_working_set_bytes{namespace=\"a\\\"b\",pod=\"x\\\\y\\nz\"} 1024\n"
        );
    }
}
