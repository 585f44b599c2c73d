//! linuxptp's `ptp4l`, asked over its management socket (a Unix datagram
//! socket, `/var/run/ptp4l` unless `TIMEHANDS_PTP4L` names another path),
//! as Meta's fbclock asks it: `TIME_STATUS_NP` (the master's offset at the
//! last Sync's ingress, whether a grandmaster is present),
//! `CURRENT_DATA_SET` (the mean path delay), `PARENT_DATA_SET` (the
//! grandmaster's stated accuracy) and `PORT_PROPERTIES_NP` (the port's
//! state and timestamping). The messages are IEEE 1588's management
//! messages, in network byte order, as `pmc` sends them.
//!
//! The bound holds for the clock ptp4l measures: CLOCK_REALTIME where it
//! timestamps in software (`-S`), which is the one read here (a hardware
//! timestamping ptp4l measures its NIC's clock, not Realtime). At the
//! ingress the Realtime was the master's time plus the measured offset,
//! to within the path delay (an asymmetry as large as the whole delay
//! shifts the measure by it) and the grandmaster's own accuracy; from
//! there the bound grows at the kernel's 500 ppm, as its `maxerror` does.
//!
//! Like chronyd's, the socket is made with system calls (bound to an
//! address the kernel picks, in the abstract namespace) and never waits:
//! a step sends the four requests, and a later one takes the answers.

use std::ffi::CStr;
use std::io;

use super::datagram::Datagram;

/// `ptp4l`'s management socket, where no `TIMEHANDS_PTP4L` names another.
pub(crate) const DEFAULT_PATH: &CStr = c"/var/run/ptp4l";
/// The management TLV's ids asked.
const TIME_STATUS_NP: u16 = 0xC000;
const CURRENT_DATA_SET: u16 = 0x2001;
const PARENT_DATA_SET: u16 = 0x2002;
const PORT_PROPERTIES_NP: u16 = 0xC004;
const ASKED: [u16; 4] = [
    TIME_STATUS_NP,
    CURRENT_DATA_SET,
    PARENT_DATA_SET,
    PORT_PROPERTIES_NP,
];
/// A GET: the 34-byte header, the management fields (14) and the TLV's
/// type, length and id (6).
const REQUEST_LEN: usize = 54;
/// The port states that measure a master (`UNCALIBRATED`, `SLAVE`).
const MEASURING: [u8; 2] = [8, 9];
/// linuxptp's `TS_SOFTWARE`: the port timestamps with CLOCK_REALTIME.
const SOFTWARE: u8 = 0;
/// `clockAccuracy` 0xFE: the grandmaster does not know its accuracy.
const UNKNOWN_ACCURACY: u8 = 0xFE;

/// ptp4l's answers to one round of requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// The Realtime (ns) at the last Sync's ingress, and the local clock's
    /// offset from the master then (ns).
    pub ingress_ns: Option<i64>,
    pub master_offset_ns: i64,
    pub gm_present: bool,
    /// The mean path delay, ns (rounded up).
    pub path_delay_ns: Option<u64>,
    /// The grandmaster's `clockAccuracy`.
    pub gm_accuracy: Option<u8>,
    /// The port's state and timestamping.
    pub port: Option<(u8, u8)>,
}

impl Status {
    /// Whether every answer of the round came.
    pub(crate) fn whole(&self) -> bool {
        self.ingress_ns.is_some()
            && self.path_delay_ns.is_some()
            && self.gm_accuracy.is_some()
            && self.port.is_some()
    }

    /// The bound on the Realtime at the ingress (ns, both sides) and the
    /// ingress itself, where ptp4l measures a grandmaster with software
    /// timestamps and the grandmaster states its accuracy; `None` elsewhere.
    pub(crate) fn bound(&self) -> Option<(u64, u64)> {
        let (state, timestamping) = self.port?;
        if !self.whole()
            || !self.gm_present
            || !MEASURING.contains(&state)
            || timestamping != SOFTWARE
        {
            return None;
        }
        let accuracy = accuracy_ns(self.gm_accuracy?)?;
        let half = self
            .master_offset_ns
            .unsigned_abs()
            .checked_add(self.path_delay_ns?)?
            .checked_add(accuracy)?;
        Some((half, u64::try_from(self.ingress_ns?).ok()?))
    }
}

/// IEEE 1588's `clockAccuracy` as ns (the upper end of its range); `None`
/// where it is unknown or past 10 s. The finer codes of 1588-2019 (0x17 to
/// 0x1F) are taken as 25 ns.
fn accuracy_ns(code: u8) -> Option<u64> {
    const FROM_0X20: [u64; 17] = [
        25,
        100,
        250,
        1_000,
        2_500,
        10_000,
        25_000,
        100_000,
        250_000,
        1_000_000,
        2_500_000,
        10_000_000,
        25_000_000,
        100_000_000,
        250_000_000,
        1_000_000_000,
        10_000_000_000,
    ];
    match code {
        0x17..=0x1F => Some(25),
        UNKNOWN_ACCURACY => None,
        code => FROM_0X20.get(usize::from(code.checked_sub(0x20)?)).copied(),
    }
}

/// A GET of `id` with `sequence`, to every port.
fn request(sequence: u16, id: u16) -> [u8; REQUEST_LEN] {
    let mut p = [0u8; REQUEST_LEN];
    // Management (0x0D), PTP version 2, the message's length.
    p[0] = 0x0D;
    p[1] = 0x02;
    p[2..4].copy_from_slice(&(REQUEST_LEN as u16).to_be_bytes());
    p[30..32].copy_from_slice(&sequence.to_be_bytes());
    // controlField: management; logMessageInterval 0x7F.
    p[32] = 0x04;
    p[33] = 0x7F;
    // The target port: every clock, every port.
    p[34..44].fill(0xFF);
    // Boundary hops 0, action GET (0); the management TLV (type 1) of
    // length 2: the id alone.
    p[48..50].copy_from_slice(&1u16.to_be_bytes());
    p[50..52].copy_from_slice(&2u16.to_be_bytes());
    p[52..54].copy_from_slice(&id.to_be_bytes());
    p
}

fn be16(p: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([p[at], p[at + 1]])
}

fn be64(p: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(p[at..at + 8].try_into().expect("8 bytes"))
}

/// Takes a RESPONSE in `reply` into `status`, where it answers one of the
/// round's requests (`first` to `first + 3`); anything else is passed over.
pub(crate) fn take(reply: &[u8], first: u16, status: &mut Status) {
    if reply.len() < REQUEST_LEN
        || reply[0] & 0x0F != 0x0D
        || reply[46] & 0x0F != 2
        || be16(reply, 48) != 1
        || be16(reply, 30).wrapping_sub(first) >= ASKED.len() as u16
    {
        return;
    }
    let data = &reply[REQUEST_LEN..];
    let length = usize::from(be16(reply, 50)).saturating_sub(2);
    if data.len() < length {
        return;
    }
    match be16(reply, 52) {
        TIME_STATUS_NP if length >= 42 => {
            status.master_offset_ns = be64(data, 0);
            status.ingress_ns = Some(be64(data, 8));
            status.gm_present = i32::from_be_bytes(data[38..42].try_into().expect("4")) != 0;
        }
        // A TimeInterval: ns scaled by 2^16.
        CURRENT_DATA_SET if length >= 18 => {
            status.path_delay_ns = u64::try_from(be64(data, 10))
                .ok()
                .map(|scaled| scaled.div_ceil(1 << 16));
        }
        PARENT_DATA_SET if length >= 21 => status.gm_accuracy = Some(data[20]),
        PORT_PROPERTIES_NP if length >= 12 => status.port = Some((data[10], data[11])),
        _ => {}
    }
}

/// A non-blocking socket to ptp4l's management socket (see
/// `datagram.rs`).
pub(crate) struct Ptp4l {
    socket: Datagram,
    /// The first sequence id of the round in flight.
    first: u16,
    /// What has come of that round.
    status: Status,
}

impl Ptp4l {
    /// A socket bound to an address of the kernel's choosing (abstract:
    /// ptp4l answers it within this network namespace) and connected to
    /// `path`, on the stack.
    ///
    /// # Errors
    /// The OS's errno; `InvalidInput` for a path too long for an address.
    pub(crate) fn open(path: &CStr) -> io::Result<Ptp4l> {
        // SAFETY: a zeroed sockaddr_un is valid; the path is copied in
        // below, shorter than its buffer (checked).
        let (mut to, mut own): (libc::sockaddr_un, libc::sockaddr_un) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        let bytes = path.to_bytes();
        if bytes.len() >= to.sun_path.len() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        to.sun_family = libc::AF_UNIX as libc::sa_family_t;
        own.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (into, &from) in to.sun_path.iter_mut().zip(bytes) {
            *into = from as libc::c_char;
        }
        // The family's length alone: the kernel picks the address.
        let family = std::mem::size_of::<libc::sa_family_t>() as libc::socklen_t;
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        Ok(Ptp4l {
            socket: Datagram::connected(
                libc::AF_UNIX,
                Some(((&raw const own).cast(), family)),
                ((&raw const to).cast(), len),
            )?,
            first: 0,
            status: Status::default(),
        })
    }

    /// Sends a round of the four requests (the last round's answers still
    /// to come are forgotten).
    ///
    /// # Errors
    /// The OS's errno (no ptp4l there: the path refuses).
    pub(crate) fn send(&mut self) -> io::Result<()> {
        self.first = self.first.wrapping_add(ASKED.len() as u16);
        self.status = Status::default();
        for (sequence, id) in (self.first..).zip(ASKED) {
            self.socket.send(&request(sequence, id))?;
        }
        Ok(())
    }

    /// The round's answers that came by now, without waiting.
    pub(crate) fn receive(&mut self) -> Status {
        let mut reply = [0u8; 512];
        while let Ok(n) = self.socket.receive(&mut reply) {
            take(&reply[..n], self.first, &mut self.status);
        }
        self.status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RESPONSE to `request` carrying `data`, as ptp4l sends it.
    fn response(request: &[u8; REQUEST_LEN], data: &[u8]) -> Vec<u8> {
        let mut r = request.to_vec();
        r[46] = 2;
        r[50..52].copy_from_slice(&(2 + data.len() as u16).to_be_bytes());
        r.extend_from_slice(data);
        r
    }

    /// A round's answers: an offset of -564 ns, a path delay of 2621 ns,
    /// a grandmaster of 250 ns, a port measuring in software.
    fn round(first: u16) -> [Vec<u8>; 4] {
        let mut time_status = vec![0u8; 50];
        time_status[0..8].copy_from_slice(&(-564i64).to_be_bytes());
        time_status[8..16].copy_from_slice(&1_800_000_000_000_000_000i64.to_be_bytes());
        time_status[38..42].copy_from_slice(&1i32.to_be_bytes());
        let mut current = vec![0u8; 18];
        current[10..18].copy_from_slice(&(2621i64 << 16).to_be_bytes());
        let mut parent = vec![0u8; 32];
        parent[20] = 0x22;
        let mut port = vec![0u8; 16];
        port[10] = 8;
        port[11] = SOFTWARE;
        let data = [time_status, current, parent, port];
        std::array::from_fn(|i| response(&request(first + i as u16, ASKED[i]), &data[i]))
    }

    #[test]
    fn a_round_of_answers_gives_the_offset_the_delay_and_the_accuracy() {
        let mut status = Status::default();
        for reply in round(8) {
            take(&reply, 8, &mut status);
        }
        assert_eq!(
            status.bound(),
            Some((564 + 2621 + 250, 1_800_000_000_000_000_000))
        );
        // Another round's answers are passed over; a round not whole gives
        // no bound.
        let mut other = Status::default();
        for reply in round(12) {
            take(&reply, 8, &mut other);
        }
        assert_eq!(other, Status::default());
        let mut partial = Status::default();
        for reply in &round(8)[..3] {
            take(reply, 8, &mut partial);
        }
        assert_eq!(partial.bound(), None);
        // Hardware timestamps measure the NIC's clock; an unknown
        // grandmaster accuracy bounds nothing; neither does no grandmaster.
        for (at, value) in [(11, 1u8), (20, UNKNOWN_ACCURACY)] {
            let mut changed = status;
            match at {
                11 => changed.port = Some((8, value)),
                _ => changed.gm_accuracy = Some(value),
            }
            assert_eq!(changed.bound(), None, "{at} {value}");
        }
        assert_eq!(
            Status {
                gm_present: false,
                ..status
            }
            .bound(),
            None
        );
        assert_eq!(accuracy_ns(0x31), None, "past 10 s");
        assert_eq!(accuracy_ns(0x2F), Some(1_000_000_000));
    }
}
