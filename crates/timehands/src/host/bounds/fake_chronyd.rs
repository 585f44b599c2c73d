//! chronyd on loopback as the tests play it: a UDP socket of their own
//! that answers every tracking request with a synchronized reply (of an
//! update a second before it started) in
//! chrony's format (`chrony.rs`'s test replies), and says which sockets
//! asked.

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::chrony::tests::reply;

/// What the server saw: the sockets that asked, and how many answers it
/// sent.
#[derive(Default)]
struct Seen {
    peers: BTreeSet<SocketAddr>,
    answered: usize,
}

/// The server, answering on a thread of its own until dropped.
pub(crate) struct FakeChronyd {
    pub(crate) address: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeChronyd {
    pub(crate) fn start() -> FakeChronyd {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a loopback socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .expect("a timeout");
        let address = socket.local_addr().expect("its address");
        let updated = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            - Duration::from_secs(1);
        let mut ref_time = [0u8; 12];
        ref_time[4..8].copy_from_slice(&(updated.as_secs() as u32).to_be_bytes());
        ref_time[8..12].copy_from_slice(&updated.subsec_nanos().to_be_bytes());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut request = [0u8; 512];
                while !stop.load(Ordering::Acquire) {
                    let Ok((n, peer)) = socket.recv_from(&mut request) else {
                        continue;
                    };
                    if n < 12 {
                        continue;
                    }
                    let sequence =
                        u32::from_be_bytes([request[8], request[9], request[10], request[11]]);
                    let mut answer = reply(sequence);
                    // No leap second announced; chronyd's last update a
                    // second ago (at its start: its answers are of one
                    // update).
                    answer[54..56].copy_from_slice(&0u16.to_be_bytes());
                    answer[56..68].copy_from_slice(&ref_time);
                    // Counted before it leaves: a test that saw the count
                    // finds the answer in its socket (loopback delivers
                    // as it sends).
                    let mut seen = seen.lock().expect("not poisoned");
                    seen.peers.insert(peer);
                    if socket.send_to(&answer, peer).is_ok() {
                        seen.answered += 1;
                    }
                }
            })
        };
        FakeChronyd {
            address,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// Waits until `n` answers went out (a few seconds at most).
    pub(crate) fn wait_answered(&self, n: usize) {
        let limit = Instant::now() + Duration::from_secs(10);
        while self.seen.lock().expect("not poisoned").answered < n {
            assert!(Instant::now() < limit, "the fake chronyd got no request");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The sockets that asked, so far.
    pub(crate) fn peers(&self) -> BTreeSet<SocketAddr> {
        self.seen.lock().expect("not poisoned").peers.clone()
    }
}

impl Drop for FakeChronyd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
