//! Text that needs no allocator: what the clock's life writes down for
//! `info` (the verdicts of the counter choice, a failover's reason, where
//! the frequency came from) as it happens. That life runs in whichever read
//! finds a step of it due, a signal handler's included, where `malloc` may
//! be the very code the handler interrupted: so the words go into a buffer
//! of fixed size, formatted by `core::fmt` (which allocates nothing), and
//! become `String`s only when `info` (which may allocate) asks.

use std::fmt;

/// Bytes a [`Text`] holds: the longest verdict is some 170. Small, as the
/// choice's texts live on the stack of the read that makes it, which may be
/// a signal handler's on a small alternate stack.
const CAPACITY: usize = 192;

/// A string of at most [`CAPACITY`] bytes, kept inline; a longer one is cut
/// at a character boundary and ends in `…`.
#[derive(Clone, Copy)]
pub(crate) struct Text {
    bytes: [u8; CAPACITY],
    len: usize,
    /// Whether it was cut: nothing more is written.
    cut: bool,
}

/// A [`Text`] formatted as `format!` would, without allocating.
macro_rules! text {
    ($($arg:tt)*) => {
        $crate::host::text::Text::format(format_args!($($arg)*))
    };
}
pub(crate) use text;

impl Text {
    /// No text.
    pub(crate) const EMPTY: Text = Text {
        bytes: [0; CAPACITY],
        len: 0,
        cut: false,
    };

    /// `args` written out (see [`text!`]).
    pub(crate) fn format(args: fmt::Arguments<'_>) -> Text {
        let mut text = Text::EMPTY;
        let _ = fmt::write(&mut text, args);
        text
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        // Only whole characters are ever copied in (see `write_str`).
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for Text {
    /// Appends `s`; where it does not fit, as much of it as does with `…`
    /// after it (the text before cut back to make room, at a character
    /// boundary), and nothing more after that.
    fn write_str(&mut self, s: &str) -> fmt::Result {
        const MORE: &str = "…";
        if self.cut {
            return Ok(());
        }
        if self.len + s.len() <= CAPACITY {
            self.append(s);
            return Ok(());
        }
        let mut cut = (CAPACITY - MORE.len())
            .saturating_sub(self.len)
            .min(s.len());
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.append(&s[..cut]);
        while self.len + MORE.len() > CAPACITY {
            let last = self.as_str().chars().next_back().map_or(1, char::len_utf8);
            self.len -= last;
        }
        self.append(MORE);
        self.cut = true;
        Ok(())
    }
}

impl Text {
    /// Appends `s`, which fits.
    fn append(&mut self, s: &str) {
        self.bytes[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
        self.len += s.len();
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<&'static str> for Text {
    fn from(s: &'static str) -> Text {
        text!("{s}")
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    /// Text formats as `format!` does, and a text too long for the buffer
    /// is cut at a character boundary, ending in `…`, never split inside a
    /// character.
    #[test]
    fn text_formats_as_format_does_and_cuts_at_a_character() {
        let t = text!("{} Hz, {:+.1} ppm", 2_600_000_000u64, -3.25);
        assert_eq!(
            t.as_str(),
            format!("{} Hz, {:+.1} ppm", 2_600_000_000u64, -3.25)
        );
        let mut long = Text::EMPTY;
        for _ in 0..CAPACITY {
            let _ = long.write_str("é");
        }
        assert!(long.as_str().ends_with('…'), "{long}");
        assert!(long.as_str().len() <= CAPACITY);
        assert!(
            long.as_str()
                .trim_end_matches('…')
                .chars()
                .all(|c| c == 'é')
        );
    }
}
