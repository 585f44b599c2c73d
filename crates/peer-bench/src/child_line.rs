//! The one line a child of peer-bench prints: `name=value` words, in any
//! order, which the parent reads by name.

use std::str::FromStr;

/// The value of the word `name=…` of `line`, if it is there and parses.
pub fn field<T: FromStr>(line: &str, name: &str) -> Option<T> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::field;

    /// A word is found by its whole name, parsed as asked; a missing or
    /// unparsable one is none.
    #[test]
    fn fields_are_found_by_name() {
        let line = "reads=12 off=0 worst_ns=36 off_by=x";
        assert_eq!(field::<u64>(line, "worst_ns"), Some(36));
        assert_eq!(field::<u64>(line, "off"), Some(0));
        assert_eq!(field::<f64>(line, "reads"), Some(12.0));
        assert_eq!(field::<u64>(line, "off_by"), None);
        assert_eq!(field::<u64>(line, "wakeups"), None);
    }
}
