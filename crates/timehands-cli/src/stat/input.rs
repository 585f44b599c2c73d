//! Reading a data set: one number a line, in a chosen column.
//!
//! The rules are ministat's, which splits lines with `strtok` and parses with
//! `strtod`:
//!
//! - trailing white space (C's `isspace`, `\r` included) is dropped;
//! - a line is split into fields at any run of the delimiter bytes (space
//!   and tab by default), so leading and repeated delimiters make no field;
//! - a field starting with `#` ends the line: a comment;
//! - a line without the chosen column (blank, all comment, or short) is
//!   skipped;
//! - the field must be a number in full, leading white space allowed.
//!
//! Three things ministat accepts are errors here, with the file and line:
//! `inf`/`nan` (they make every statistic and the plot meaningless), C's
//! hexadecimal floats such as `0x10`, which Rust's parser does not read, and
//! a line over a MiB (ministat reads it in pieces of its buffer's size).

use std::io::{BufRead, BufReader, Read};

use anyhow::{Context, Result, bail};

use super::sample::Sample;

/// Where the number is on each line.
#[derive(Debug, Clone)]
pub struct Columns {
    /// The field to read, counted from 1.
    pub column: usize,
    /// The bytes that separate fields, any of them, as `strtok` takes them.
    pub delimiters: Vec<u8>,
}

/// C's `isspace` in the C locale; Rust's `is_ascii_whitespace` leaves out
/// the vertical tab.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

impl Columns {
    /// The chosen field of `line`, or `None` when the line has no such field
    /// before a comment.
    fn field<'a>(&self, line: &'a [u8]) -> Option<&'a [u8]> {
        let end = line
            .iter()
            .rposition(|&b| !is_c_space(b))
            .map_or(0, |i| i + 1);
        line[..end]
            .split(|b| self.delimiters.contains(b))
            .filter(|f| !f.is_empty())
            .take_while(|f| f[0] != b'#')
            .nth(self.column - 1)
    }
}

/// The longest line read: a longer one is no data set's line (`/dev/zero`
/// has none at all), and would otherwise be held whole in memory.
const MAX_LINE: u64 = 1 << 20;

/// The data set `name` from everything `reader` yields.
pub fn read_sample(name: &str, reader: impl Read, columns: &Columns) -> Result<Sample> {
    let mut reader = BufReader::new(reader);
    let mut points = Vec::new();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut line)
            .with_context(|| format!("cannot read {name}"))?;
        if read == 0 {
            break;
        }
        if line.len() as u64 > MAX_LINE {
            bail!("line {number} in {name} is longer than {MAX_LINE} bytes");
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let Some(field) = columns.field(&line) else {
            continue;
        };
        points.push(
            parse_number(field)
                .with_context(|| format!("invalid data on line {number} in {name}"))?,
        );
    }
    Sample::new(name, points)
}

/// The most of a bad field an error shows, in characters: the line's
/// number names it, and a field of megabytes is no message.
const SHOWN: usize = 40;

/// A finite decimal number, as `strtod` reads a whole field.
fn parse_number(field: &[u8]) -> Result<f64> {
    let start = field
        .iter()
        .position(|&b| !is_c_space(b))
        .unwrap_or(field.len());
    let text = String::from_utf8_lossy(&field[start..]);
    let Ok(value) = text.parse::<f64>() else {
        bail!("{} is not a number", shown(&text));
    };
    if !value.is_finite() {
        bail!("{} is not a finite number", shown(&text));
    }
    Ok(value)
}

/// `text` quoted, or its first [`SHOWN`] characters and its length when
/// longer.
fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN) {
        None => format!("{text:?}"),
        Some((end, _)) => format!("{:?}… ({} bytes)", &text[..end], text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::{Columns, read_sample};

    fn columns(column: usize, delimiters: &str) -> Columns {
        Columns {
            column,
            delimiters: delimiters.as_bytes().to_vec(),
        }
    }

    fn points(text: &str, columns: &Columns) -> Vec<f64> {
        read_sample("t", text.as_bytes(), columns)
            .expect("valid")
            .points()
            .to_vec()
    }

    #[test]
    fn comments_blank_lines_and_trailing_space_are_skipped() {
        let text = "# head\n1 # one\n#2\n 3\n\n4\r\n5 6\n\t7\x0b\n";
        assert_eq!(points(text, &columns(1, " \t")), [1.0, 3.0, 4.0, 5.0, 7.0]);
    }

    #[test]
    fn a_column_past_the_end_or_behind_a_comment_skips_the_line() {
        let text = "a 1\nb 2 # c\nc # 9\nd\ne  3\n";
        assert_eq!(points(text, &columns(2, " \t")), [1.0, 2.0, 3.0]);
    }

    #[test]
    fn any_delimiter_byte_separates_and_leading_space_is_allowed() {
        let text = "x,1;9\ny;;2,9\nz, 3,9\n";
        assert_eq!(points(text, &columns(2, ",;")), [1.0, 2.0, 3.0]);
    }

    #[test]
    fn strtod_forms_parse() {
        let text = "1e3\n+2\n.5\n5.\n-0.25\n";
        assert_eq!(
            points(text, &columns(1, " ")),
            [-0.25, 0.5, 2.0, 5.0, 1000.0]
        );
    }

    #[test]
    fn a_line_too_long_is_refused_before_it_is_read_whole() {
        let endless = std::io::repeat(b'1');
        let err = read_sample("zero", endless, &columns(1, " "))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1 in zero is longer than 1048576 bytes"
        );
    }

    #[test]
    fn a_bad_field_names_the_file_and_line() {
        for (text, why) in [
            ("1\n2\nabc\n", "\"abc\" is not a number"),
            ("1\n2\n3x\n", "\"3x\" is not a number"),
            ("1\n2\ninf\n", "\"inf\" is not a finite number"),
            ("1\n2\n3 ,\n", "\"3 \" is not a number"),
            (
                &format!("1\n2\n{}\n", "7".repeat(4_999) + "x"),
                &format!("\"{}\"… (5000 bytes) is not a number", "7".repeat(40)),
            ),
        ] {
            let err = read_sample("data.txt", text.as_bytes(), &columns(1, ","))
                .map(|_| ())
                .unwrap_err();
            assert_eq!(
                format!("{err:#}"),
                format!("invalid data on line 3 in data.txt: {why}")
            );
        }
    }
}
