//! Plain HTTP/1.1 requests for the status server, written by hand so that
//! the test sends exactly what it means to (no client normalises a target).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An HTTP reply as it came.
pub struct Reply {
    pub status: u16,
    pub headers: String,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request over a fresh connection; `target` is sent exactly as
/// given (no normalisation, no encoding).
pub fn request(addr: SocketAddr, method: &str, target: &str, extra: &str) -> Reply {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete HTTP response");
    let headers = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = headers.split(' ').nth(1).unwrap().parse().unwrap();
    Reply {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

pub fn get(addr: SocketAddr, target: &str) -> Reply {
    request(addr, "GET", target, "")
}
