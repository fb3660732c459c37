//! Parsers for the text of cgroup and procfs files. No IO: each takes the file's text,
//! so the formats are tested from captured fixtures. A line that does not parse is
//! skipped, not fatal: old kernels and other writers vary, and one odd line must not
//! cost the rest of the file.

/// A single number (`memory.current`, `cpuacct.usage`, `pids.current`). `max` and
/// anything unparsable give `None`.
pub fn single(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A flat keyed file (`memory.stat`, `cpu.stat`, `memory.events`, `cpuacct.stat`,
/// `memory.oom_control`): `key value` per line.
pub fn flat_keyed(text: &str) -> Vec<(&str, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let key = fields.next()?;
            let value = fields.next()?.parse().ok()?;
            Some((key, value))
        })
        .collect()
}

/// The value of `key` in a flat keyed file's entries.
pub fn key(entries: &[(&str, u64)], key: &str) -> Option<u64> {
    entries.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// One block device's I/O, by its `major:minor`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceIo {
    pub major: u64,
    pub minor: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
}

/// cgroup v2 `io.stat`: `8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0` per device.
pub fn io_stat(text: &str) -> Vec<DeviceIo> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (major, minor) = device(fields.next()?)?;
            let mut io = DeviceIo {
                major,
                minor,
                ..DeviceIo::default()
            };
            for field in fields {
                let Some((name, value)) = field.split_once('=') else {
                    continue;
                };
                let Ok(value) = value.parse() else { continue };
                match name {
                    "rbytes" => io.read_bytes = value,
                    "wbytes" => io.write_bytes = value,
                    "rios" => io.read_ops = value,
                    "wios" => io.write_ops = value,
                    _ => {}
                }
            }
            Some(io)
        })
        .collect()
}

/// cgroup v1 `blkio.throttle.io_service_bytes_recursive` and `…io_serviced_recursive`
/// together: `8:0 Read 4096` lines (and a `Total` line, ignored).
pub fn blkio_v1(bytes_text: &str, ops_text: &str) -> Vec<DeviceIo> {
    let mut devices: Vec<DeviceIo> = Vec::new();
    let mut add = |text: &str, bytes: bool| {
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(dev), Some(op), Some(value)) = (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let (Some((major, minor)), Ok(value)) = (device(dev), value.parse::<u64>()) else {
                continue;
            };
            let pos = match devices
                .iter()
                .position(|d| (d.major, d.minor) == (major, minor))
            {
                Some(pos) => pos,
                None => {
                    devices.push(DeviceIo {
                        major,
                        minor,
                        ..DeviceIo::default()
                    });
                    devices.len() - 1
                }
            };
            let io = &mut devices[pos];
            match (op, bytes) {
                ("Read", true) => io.read_bytes = value,
                ("Write", true) => io.write_bytes = value,
                ("Read", false) => io.read_ops = value,
                ("Write", false) => io.write_ops = value,
                _ => {}
            }
        }
    };
    add(bytes_text, true);
    add(ops_text, false);
    devices
}

fn device(text: &str) -> Option<(u64, u64)> {
    let (major, minor) = text.split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// One network interface's counters, as `/proc/<pid>/net/dev` gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

/// `/proc/<pid>/net/dev`: two header lines, then `name: rx(8 fields) tx(8 fields)`.
pub fn net_dev(text: &str) -> Vec<InterfaceCounters> {
    text.lines()
        .filter_map(|line| {
            let (name, counters) = line.split_once(':')?;
            let values: Vec<u64> = counters
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            if values.len() < 16 {
                return None;
            }
            Some(InterfaceCounters {
                name: name.trim().to_string(),
                rx_bytes: values[0],
                rx_packets: values[1],
                rx_errors: values[2],
                rx_dropped: values[3],
                tx_bytes: values[8],
                tx_packets: values[9],
                tx_errors: values[10],
                tx_dropped: values[11],
            })
        })
        .collect()
}

/// Lines of a list file (`cgroup.procs`, `tasks`, `cgroup.threads`) as process ids.
pub fn pid_list(text: &str) -> Vec<u32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}
