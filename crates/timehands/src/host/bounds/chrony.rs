//! chronyd's own view of the time: its tracking report, asked over its
//! command port (UDP, `127.0.0.1:323` unless `TIMEHANDS_CHRONYD` names
//! another address), which answers monitoring requests without privilege.
//!
//! The protocol is chrony's `candm.h`, version 6: a request of a 20-byte
//! header padded to the length of its reply (chronyd refuses shorter ones,
//! so that it never amplifies), a reply of a 28-byte header and the
//! tracking record, every field in network byte order, every real number a
//! 32-bit float of chrony's own (a 7-bit exponent and a 25-bit coefficient).
//! Written here rather than taken from the `chrony-candm` crate, which is
//! GPL-2.0-only while timehands is MIT or Apache-2.0.
//!
//! The socket is made and used with system calls on the stack, and never
//! waits: a read of the bounds sends a request and a later one takes the
//! answer (`refresh.rs`), in a signal handler as well as anywhere.

#[cfg(unix)]
use std::io;
use std::net::SocketAddr;

#[cfg(unix)]
use super::datagram::Datagram;
use std::time::Duration;

/// chrony's command protocol version (`PROTO_VERSION_NUMBER`).
const PROTOCOL_VERSION: u8 = 6;
/// `PKT_TYPE_CMD_REQUEST`, `PKT_TYPE_CMD_REPLY`.
const REQUEST: u8 = 1;
const REPLY: u8 = 2;
/// `REQ_TRACKING`, `RPY_TRACKING`.
const REQ_TRACKING: u16 = 33;
const RPY_TRACKING: u16 = 5;
/// `STT_SUCCESS`.
const STATUS_SUCCESS: u16 = 0;
/// The tracking reply's length: its 28-byte header and the record up to
/// (not including) its end-of-record marker. The request is padded to it.
const TRACKING_LEN: usize = 28 + 76;
/// The leap status chronyd reports when it is not synchronized
/// (`LEAP_Unsynchronised`).
const LEAP_UNSYNCHRONISED: u16 = 3;

/// chronyd's command port on this machine, where no `TIMEHANDS_CHRONYD`
/// names another.
pub(crate) const DEFAULT_ADDRESS: &str = "127.0.0.1:323";

/// How long a request waits for chronyd's answer: chronyd answers in tens
/// of microseconds; a daemon that does not within this is taken as gone.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(500);

/// chronyd's tracking report (`chronyc tracking`), in seconds and ppm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Tracking {
    /// The reference's id (an IPv4 address, or a refclock's name).
    pub ref_id: u32,
    /// 0 normal, 1 a leap second to insert at the end of the UTC day, 2 one
    /// to delete, 3 unsynchronized.
    pub leap_status: u16,
    /// When chronyd last updated its clock, UTC seconds since the epoch
    /// (on chronyd's own estimate of true time).
    pub ref_time: f64,
    /// What chronyd still has to correct: the system clock is this much
    /// behind chronyd's estimate of true time (ahead if negative).
    pub current_correction: f64,
    /// The frequency's error the last update left, ppm.
    pub resid_freq_ppm: f64,
    /// The bound on the frequency's error chronyd estimates, ppm.
    pub skew_ppm: f64,
    /// The round trip to the stratum-1 source, summed along the way.
    pub root_delay: f64,
    /// The dispersion accumulated to the stratum-1 source, grown to the
    /// moment chronyd answered.
    pub root_dispersion: f64,
    /// The interval between chronyd's last two updates.
    pub last_update_interval: f64,
}

impl Tracking {
    /// Whether chronyd says it is synchronized.
    pub(crate) fn synchronized(&self) -> bool {
        self.leap_status != LEAP_UNSYNCHRONISED
    }

    /// chronyd's root distance: how far its estimate of true time can be
    /// from UTC (half the root delay plus the root dispersion), seconds.
    pub(crate) fn root_distance(&self) -> f64 {
        self.root_delay / 2.0 + self.root_dispersion
    }
}

/// The request for tracking with `sequence`: the header, then zeros to the
/// reply's length.
fn request(sequence: u32) -> [u8; TRACKING_LEN] {
    let mut packet = [0u8; TRACKING_LEN];
    packet[0] = PROTOCOL_VERSION;
    packet[1] = REQUEST;
    packet[4..6].copy_from_slice(&REQ_TRACKING.to_be_bytes());
    // attempt (6..8) 0; sequence; pad1, pad2 0.
    packet[8..12].copy_from_slice(&sequence.to_be_bytes());
    packet
}

/// chrony's 32-bit float: `coef * 2^(exp - 25)`, a signed 7-bit exponent
/// over a signed 25-bit coefficient (`UTI_FloatNetworkToHost`).
fn chrony_float(x: u32) -> f64 {
    const COEF_BITS: u32 = 25;
    let mut exp = (x >> COEF_BITS) as i32;
    if exp >= 1 << 6 {
        exp -= 1 << 7;
    }
    let mut coef = (x % (1 << COEF_BITS)) as i32;
    if coef >= 1 << (COEF_BITS - 1) {
        coef -= 1 << COEF_BITS;
    }
    f64::from(coef) * 2f64.powi(exp - COEF_BITS as i32)
}

/// The big-endian u32 at `at`.
fn be32(packet: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([packet[at], packet[at + 1], packet[at + 2], packet[at + 3]])
}

/// The big-endian u16 at `at`.
fn be16(packet: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([packet[at], packet[at + 1]])
}

/// Why a reply is not the tracking report asked for (one line each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadReply {
    /// Shorter than the reply's header, bytes.
    Short(usize),
    /// Another protocol version or packet type.
    Protocol { version: u8, kind: u8 },
    /// chronyd refused the request with this status.
    Refused(u16),
    /// A reply (command, reply type) to another request.
    Other { command: u16, kind: u16 },
    /// A tracking reply of this many bytes, too short.
    Truncated(usize),
}

impl std::fmt::Display for BadReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            BadReply::Short(n) => {
                write!(f, "chronyd's reply is {n} bytes, shorter than its header")
            }
            BadReply::Protocol { version, kind } => write!(
                f,
                "chronyd answered with protocol version {version} packet type {kind}: timehands speaks version {PROTOCOL_VERSION}"
            ),
            BadReply::Refused(status) => {
                write!(
                    f,
                    "chronyd refused the tracking request with status {status}"
                )
            }
            BadReply::Other { command, kind } => write!(
                f,
                "chronyd's reply (command {command}, reply {kind}) answers another request"
            ),
            BadReply::Truncated(n) => {
                write!(
                    f,
                    "chronyd's tracking reply is {n} bytes, not {TRACKING_LEN}"
                )
            }
        }
    }
}

/// The tracking report in `reply`, an answer to `sequence`. Allocates
/// nothing, on either path: a step of the bounds calls it (see
/// `refresh.rs`).
///
/// # Errors
/// A reply that is not a successful tracking reply to that request, which
/// says in one line what it is.
pub(crate) fn parse(reply: &[u8], sequence: u32) -> Result<Tracking, BadReply> {
    if reply.len() < 28 {
        return Err(BadReply::Short(reply.len()));
    }
    if reply[0] != PROTOCOL_VERSION || reply[1] != REPLY {
        return Err(BadReply::Protocol {
            version: reply[0],
            kind: reply[1],
        });
    }
    let (command, kind, status) = (be16(reply, 4), be16(reply, 6), be16(reply, 8));
    if status != STATUS_SUCCESS {
        return Err(BadReply::Refused(status));
    }
    if command != REQ_TRACKING || kind != RPY_TRACKING || be32(reply, 16) != sequence {
        return Err(BadReply::Other { command, kind });
    }
    if reply.len() < TRACKING_LEN {
        return Err(BadReply::Truncated(reply.len()));
    }
    let float = |at| chrony_float(be32(reply, at));
    // ref_id 28, ip_addr 32..52, stratum 52, leap_status 54, ref_time 56
    // (seconds high, low, nanoseconds), then the floats from 68.
    let seconds_high = be32(reply, 56);
    // `TV_NOHIGHSEC` marks a 32-bit time.
    let seconds_high = if seconds_high == 0x7fff_ffff {
        0
    } else {
        u64::from(seconds_high)
    };
    let seconds = (seconds_high << 32) | u64::from(be32(reply, 60));
    Ok(Tracking {
        ref_id: be32(reply, 28),
        leap_status: be16(reply, 54),
        ref_time: seconds as f64 + f64::from(be32(reply, 64)) * 1e-9,
        current_correction: float(68),
        resid_freq_ppm: float(84),
        skew_ppm: float(88),
        root_delay: float(92),
        root_dispersion: float(96),
        last_update_interval: float(100),
    })
}

/// chronyd's address: `TIMEHANDS_CHRONYD` where it is set (`None` where
/// it does not parse as an IP address and port: passed over, as a read has
/// nowhere to say so), [`DEFAULT_ADDRESS`] where it is not.
pub(crate) fn address(variable: Option<&str>) -> Option<SocketAddr> {
    match variable {
        None => DEFAULT_ADDRESS.parse().ok(),
        Some(value) => value.parse().ok(),
    }
}

/// What a look at the socket found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Received {
    /// The answer to the last request.
    Tracking(Tracking),
    /// Nothing yet.
    Nothing,
    /// An error (chronyd's port refused on loopback comes so, at once) or a
    /// reply that is not the tracking report asked for.
    Failed,
}

/// A non-blocking socket to chronyd's command port (see `datagram.rs`).
/// A request is sent by one step of the bounds and its answer taken by a
/// later one, so no read waits for chronyd.
#[cfg(unix)]
pub(crate) struct Chronyd {
    socket: Datagram,
    sequence: u32,
}

#[cfg(unix)]
impl Chronyd {
    /// A socket connected to `address`, on the stack.
    ///
    /// # Errors
    /// The OS's errno, where it refuses.
    pub(crate) fn open(address: SocketAddr) -> io::Result<Chronyd> {
        // SAFETY: a zeroed sockaddr_in6 is valid storage for either family;
        // the fields written are those of the family given.
        let mut storage: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        let (family, len) = match address {
            SocketAddr::V4(v4) => {
                let sin = (&raw mut storage).cast::<libc::sockaddr_in>();
                // SAFETY: sockaddr_in fits in sockaddr_in6's storage.
                unsafe {
                    (*sin).sin_family = libc::AF_INET as libc::sa_family_t;
                    (*sin).sin_port = v4.port().to_be();
                    (*sin).sin_addr.s_addr = u32::from(*v4.ip()).to_be();
                }
                (libc::AF_INET, std::mem::size_of::<libc::sockaddr_in>())
            }
            SocketAddr::V6(v6) => {
                storage.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                storage.sin6_port = v6.port().to_be();
                storage.sin6_addr.s6_addr = v6.ip().octets();
                storage.sin6_scope_id = v6.scope_id();
                (libc::AF_INET6, std::mem::size_of::<libc::sockaddr_in6>())
            }
        };
        let to = ((&raw const storage).cast(), len as libc::socklen_t);
        Ok(Chronyd {
            socket: Datagram::connected(family, None, to)?,
            sequence: std::process::id().rotate_left(16),
        })
    }

    /// Sends a tracking request (a new sequence number), without waiting.
    ///
    /// # Errors
    /// The OS's errno (a refusal chronyd's port left on the socket).
    pub(crate) fn send(&mut self) -> io::Result<()> {
        self.sequence = self.sequence.wrapping_add(1);
        self.socket.send(&request(self.sequence))
    }

    /// The answer to the last request, if it came: replies to earlier
    /// requests (one that timed out) are skipped.
    pub(crate) fn receive(&mut self) -> Received {
        let mut reply = [0u8; 512];
        loop {
            let n = match self.socket.receive(&mut reply) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Received::Nothing,
                Err(_) => return Received::Failed,
            };
            if n >= 20 && be32(&reply, 16) != self.sequence {
                continue;
            }
            return match parse(&reply[..n], self.sequence) {
                Ok(tracking) => Received::Tracking(tracking),
                Err(_) => Received::Failed,
            };
        }
    }

    /// The socket's own port (for the tests).
    #[cfg(test)]
    pub(crate) fn local_port(&self) -> u16 {
        self.socket.local_port()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// chrony's float encoder (`UTI_FloatHostToNetwork`) for values in
    /// range, for the tests.
    pub(crate) fn encode(x: f64) -> u32 {
        let (neg, x) = (x < 0.0, x.abs());
        if x < 1e-100 {
            return 0;
        }
        let mut exp = (x.log2() as i32) + 1;
        let mut coef = (x * 2f64.powi(-exp + 25) + 0.5) as i64;
        // The coefficient's largest (0x00ff_ffff), one more when negative.
        while coef > 0x00ff_ffff + i64::from(neg) {
            coef >>= 1;
            exp += 1;
        }
        if neg {
            coef = -coef;
        }
        ((exp as u32) << 25) | (coef as u32 & 0x01ff_ffff)
    }

    /// A tracking reply as chronyd 4.x sends it.
    pub(crate) fn reply(sequence: u32) -> Vec<u8> {
        let mut p = vec![0u8; TRACKING_LEN];
        p[0] = 6;
        p[1] = 2;
        p[4..6].copy_from_slice(&33u16.to_be_bytes());
        p[6..8].copy_from_slice(&5u16.to_be_bytes());
        p[16..20].copy_from_slice(&sequence.to_be_bytes());
        p[28..32].copy_from_slice(&0x7f00_0001u32.to_be_bytes());
        p[54..56].copy_from_slice(&1u16.to_be_bytes());
        p[56..60].copy_from_slice(&0u32.to_be_bytes());
        p[60..64].copy_from_slice(&1_795_435_200u32.to_be_bytes());
        p[64..68].copy_from_slice(&250_000_000u32.to_be_bytes());
        for (at, value) in [
            (68, -12.5e-6),
            (84, 0.002),
            (88, 0.125),
            (92, 250e-6),
            (96, 40e-6),
            (100, 2.0),
        ] {
            p[at..at + 4].copy_from_slice(&encode(value).to_be_bytes());
        }
        p
    }

    #[test]
    fn the_request_is_the_header_padded_to_the_replys_length() {
        let r = request(0x0102_0304);
        assert_eq!(r.len(), 104);
        assert_eq!(&r[..12], &[6, 1, 0, 0, 0, 33, 0, 0, 1, 2, 3, 4]);
        assert!(r[12..].iter().all(|&b| b == 0));
    }

    #[test]
    fn chrony_floats_decode_as_chrony_encodes_them() {
        for x in [0.0, 1.0, -1.0, 12.5e-6, -3.75e-3, 1e-9, 83_333.0, 0.5] {
            let back = chrony_float(encode(x));
            assert!((back - x).abs() <= x.abs() * 1e-7, "{x} came back {back}");
        }
    }

    #[test]
    fn a_tracking_reply_is_read_field_by_field() {
        let t = parse(&reply(7), 7).expect("a tracking reply");
        assert_eq!(t.ref_id, 0x7f00_0001);
        assert_eq!(t.leap_status, 1);
        assert!(t.synchronized());
        assert!((t.ref_time - 1_795_435_200.25).abs() < 1e-6);
        assert!((t.current_correction + 12.5e-6).abs() < 1e-12);
        assert!((t.skew_ppm - 0.125).abs() < 1e-9);
        assert!((t.root_distance() - 165e-6).abs() < 1e-11);
        assert!((t.last_update_interval - 2.0).abs() < 1e-9);
    }

    #[test]
    fn a_reply_that_is_not_ours_is_refused_in_one_line() {
        let mut wrong_status = reply(7);
        wrong_status[8..10].copy_from_slice(&6u16.to_be_bytes());
        let cases = [
            (reply(7)[..20].to_vec(), 7, "shorter than its header"),
            (reply(8), 7, "answers another request"),
            (wrong_status, 7, "status 6"),
            (reply(7)[..60].to_vec(), 7, "not 104"),
        ];
        for (packet, sequence, says) in cases {
            let e = parse(&packet, sequence).expect_err(says).to_string();
            assert!(e.contains(says) && !e.contains('\n'), "{e}");
        }
        let mut old = reply(7);
        old[0] = 5;
        assert!(
            parse(&old, 7)
                .unwrap_err()
                .to_string()
                .contains("version 5")
        );
    }

    #[test]
    fn an_address_that_does_not_parse_is_passed_over() {
        assert_eq!(address(None), DEFAULT_ADDRESS.parse().ok());
        assert_eq!(address(Some("[::1]:3230")), "[::1]:3230".parse().ok());
        assert_eq!(address(Some("localhost:three")), None);
    }
}
