//! One PLC connection: MBAP frames in, one answer per frame out, until the
//! PLC closes, goes quiet for the idle timeout, or breaks the framing.
//!
//! The MBAP header (Modbus Messaging on TCP/IP, §3.1.3): transaction id
//! (echoed), protocol id (0), length (the unit id plus the PDU), unit id.
//! A frame whose header cannot be trusted (protocol id not 0, a length
//! outside 2..=254) ends the connection: the bytes after it cannot be
//! framed. Every frame with a sound header gets an answer.
//!
//! A PLC's trigger starts here: a write to the Trigger coil is framed by
//! `serve`, answered by `dispatch::answer`, and turns into
//! `Station::write_coil` and `TriggerDesk::trigger`; its verdict comes back
//! through `line::Line` to `Station::send` and ResultsValid. `plc`'s module
//! doc draws the whole way.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::dispatch;
use super::station::Station;

const MBAP_HEADER: usize = 7;
/// The largest MBAP length: the unit id and a PDU of at most 253 bytes.
const MAX_MBAP_LENGTH: usize = 254;

/// Why a connection ended.
#[derive(Debug)]
pub enum End {
    /// The PLC closed it.
    Closed,
    /// Nothing came for the idle timeout (or a frame stalled half-way).
    Idle,
    /// A header that cannot be framed.
    Framing(String),
    Io(io::Error),
}

/// What a connection reports to the server as it serves: the requests it
/// answered, and when it last had one (the server closes the connection
/// silent longest when it is full).
pub struct Activity<'a> {
    pub requests: &'a AtomicU64,
    /// Milliseconds after `epoch`.
    pub last_request: &'a AtomicU64,
    pub epoch: Instant,
}

/// Serves `stream` until it ends.
pub async fn serve(
    stream: TcpStream,
    stations: Arc<[Arc<Station>]>,
    idle: Duration,
    activity: Activity<'_>,
) -> End {
    // A PLC polls every few milliseconds: answers go out at once.
    let _ = stream.set_nodelay(true);
    // One read takes a whole frame (header and PDU), not two.
    let mut stream = BufReader::with_capacity(2 * (MBAP_HEADER + MAX_MBAP_LENGTH), stream);
    let mut header = [0u8; MBAP_HEADER];
    let mut request = [0u8; MAX_MBAP_LENGTH];
    let mut reply = Vec::with_capacity(MBAP_HEADER + 256);
    loop {
        if let Err(end) = read(&mut stream, &mut header, idle).await {
            return end;
        }
        let protocol = u16::from_be_bytes([header[2], header[3]]);
        let length = usize::from(u16::from_be_bytes([header[4], header[5]]));
        if protocol != 0 {
            return End::Framing(format!("protocol id {protocol} (Modbus is 0)"));
        }
        if !(2..=MAX_MBAP_LENGTH).contains(&length) {
            return End::Framing(format!("MBAP length {length} (a request has 2 to 254)"));
        }
        let pdu = &mut request[..length - 1];
        if let Err(end) = read(&mut stream, pdu, idle).await {
            return end;
        }
        activity.requests.fetch_add(1, Ordering::Relaxed);
        let since = u64::try_from(activity.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        activity.last_request.store(since, Ordering::Relaxed);
        let unit = header[6];
        reply.clear();
        reply.extend_from_slice(&header[..4]);
        reply.extend_from_slice(&[0, 0, unit]);
        dispatch::answer(&stations, unit, pdu, &mut reply);
        let length = (reply.len() - 6) as u16;
        reply[4..6].copy_from_slice(&length.to_be_bytes());
        match timeout(idle, stream.write_all(&reply)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return End::Io(error),
            Err(_) => return End::Idle,
        }
    }
}

async fn read(
    stream: &mut BufReader<TcpStream>,
    into: &mut [u8],
    idle: Duration,
) -> Result<(), End> {
    match timeout(idle, stream.read_exact(into)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) if error.kind() == io::ErrorKind::UnexpectedEof => Err(End::Closed),
        Ok(Err(error)) => Err(End::Io(error)),
        Err(_) => Err(End::Idle),
    }
}
