//! CRI-format container log files: writer with rotation, reader with tail/follow.
