//! The Modbus TCP server (src/plc) over real sockets: real `TriggerDesk`s,
//! verdicts fed through `Station::send` by a line double, and a PLC
//! simulator (tests/common/plc.rs) on loopback. No camera: the frame path is
//! not part of this; tests/plc.rs runs the whole line.

use crate::common;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use common::plc::{Plc, TriggerRefused};
use sealcheck::capture::EndOfStream;
use sealcheck::config::{CavityLayout, CavityRect, ModbusConfig};
use sealcheck::cycle::CycleVerdicts;
use sealcheck::decision::{Decision, Reason};
use sealcheck::frame::Part;
use sealcheck::frame::StageMessage;
use sealcheck::line::{LineOutput, LineVerdict};
use sealcheck::plc::{ModbusServer, STOP_WAIT, Station};
use sealcheck::ring::{Popped, RingSet, frame_ring};
use sealcheck::service::Liveness;
use sealcheck::trigger::{PartRings, TriggerDesk};
use tokio_modbus::ExceptionCode;

const WAIT: Duration = Duration::from_secs(5);

fn config(buffer: usize, handshake: bool) -> ModbusConfig {
    ModbusConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        buffer,
        handshake,
        allow: Vec::new(),
        max_connections: 4,
        idle_timeout: Duration::from_secs(30),
    }
}

/// A server with `cameras` stations whose desks are ready.
/// Waits (at most `WAIT`) until the server counts at most `open` connections
/// open: it counts a close when the connection's task next runs.
fn wait_open_at_most(server: &ModbusServer, open: usize, what: &str) {
    let start = Instant::now();
    while server.counters().open.load(Ordering::Relaxed) > open {
        assert!(start.elapsed() < WAIT, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn start(config: &ModbusConfig, cameras: u16) -> (ModbusServer, Vec<Arc<Station>>) {
    let stations: Vec<Arc<Station>> = (0..cameras)
        .map(|camera| {
            let desk = Arc::new(TriggerDesk::new(camera, Duration::ZERO));
            desk.set_ready(true);
            Arc::new(Station::new(camera as u8 + 1, desk, config, None))
        })
        .collect();
    let server = ModbusServer::start(config, stations.clone()).unwrap();
    (server, stations)
}

/// The verdict the line would send for part `number` with id `id`.
fn verdict(number: u64, id: u64, reason: Reason) -> LineVerdict {
    LineVerdict {
        seq: 10_000 + number,
        part: Part {
            number,
            id,
            trigger: None,
            framed: true,
        },
        captured_at: SystemTime::now(),
        captured_instant: Instant::now(),
        decision: Decision {
            verdict: reason.verdict(),
            reason,
            defect_prob: Some(0.5),
            seal_area: None,
        },
        latency_ms: 3.0,
        deadline: None,
        models: None,
        camera: None,
        cavities: None,
    }
}

/// A line double for a station's camera: the real matcher (`PartRings`)
/// over a ring that gets no frames, so each accepted trigger comes out as
/// its part (the desk's number and id) once `FRAME_WAIT` is over; the double
/// sends each part a verdict after `delay` (pass for an even id, defect for
/// an odd one). Stops when `stop()` is called, or after a minute at most.
struct LineDouble {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<u64>>>,
}

const FRAME_WAIT: Duration = Duration::from_millis(5);

impl LineDouble {
    fn start(station: Arc<Station>, delay: Duration) -> LineDouble {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (_producer, consumer) = frame_ring::<EndOfStream>(4);
            let desk = Arc::clone(station.desk());
            let mut parts = PartRings::triggered(
                RingSet::new(vec![consumer]),
                vec![desk],
                FRAME_WAIT,
                Liveness::new(),
            );
            let mut sent = Vec::new();
            let start = Instant::now();
            while !stopping.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(60) {
                if let Some(Popped::Marker(StageMessage::PartMissed { meta, .. })) =
                    parts.pop(Duration::from_millis(10))
                {
                    std::thread::sleep(delay);
                    let reason = if meta.part.id % 2 == 1 {
                        Reason::Defect
                    } else {
                        Reason::Ok
                    };
                    let mut v = verdict(meta.part.number, meta.part.id, reason);
                    v.part = meta.part;
                    v.seq = meta.seq;
                    station.send(&v);
                    sent.push(meta.part.id);
                }
            }
            sent
        });
        LineDouble {
            stop,
            thread: Some(thread),
        }
    }

    /// The part ids it sent verdicts for, in order.
    fn stop(mut self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

#[test]
fn a_plc_runs_many_parts_through_the_full_handshake_in_order() {
    let (server, stations) = start(&config(8, true), 1);
    let addr = server.local_addr();
    let line = LineDouble::start(Arc::clone(&stations[0]), Duration::from_millis(2));
    let parts = 150u32;
    let first_id = 4711u32;
    // The PLC's reading side: its own connection, as a second PLC task would.
    let taken = Arc::new(AtomicU32::new(0));
    let reader = std::thread::spawn({
        let taken = Arc::clone(&taken);
        move || {
            let mut plc = Plc::connect(addr, 1);
            (0..parts)
                .map_while(|_| {
                    let result = plc.take_result(WAIT)?;
                    taken.fetch_add(1, Ordering::Relaxed);
                    Some(result)
                })
                .collect::<Vec<_>>()
        }
    });
    let mut plc = Plc::connect(addr, 1);
    assert!(plc.bits().online);
    plc.enable(true);
    assert!(plc.bits().trigger_ready);
    for i in 0..parts {
        // The PLC's flow control: no trigger while 6 parts are triggered and not yet
        // read, so the 8 places of the buffer always suffice. (Counting ResultsBuffered
        // instead leaves out the parts still on their way to a verdict: on a loaded
        // machine more than 2 of them were, the buffer filled and dropped the newest,
        // as it must: a `make test` beside a release build lost parts 4736 and 4737 so.)
        let start = Instant::now();
        while i - taken.load(Ordering::Relaxed) >= 6 {
            assert!(start.elapsed() < WAIT, "the reader stopped taking results");
            std::thread::sleep(common::plc::POLL);
        }
        let id = first_id + i;
        plc.trigger_when_ready(id, WAIT)
            .unwrap_or_else(|e| panic!("part {id}: {e:?}"));
    }
    let results = reader.join().unwrap();
    let sent = line.stop();
    let ids: Vec<u32> = results.iter().map(|r| r.part_id).collect();
    let expected: Vec<u32> = (first_id..first_id + parts).collect();
    assert_eq!(
        sent,
        expected.iter().map(|&id| u64::from(id)).collect::<Vec<_>>(),
        "the desk got each id"
    );
    assert_eq!(ids, expected, "every part exactly once, in trigger order");
    for r in &results {
        assert_eq!(r.pass, r.part_id % 2 == 0, "{r:?}");
        assert_eq!(r.reason_code, if r.pass { 0 } else { 1 });
        assert_eq!(
            (r.defect_prob, r.trigger_to_result, r.late),
            (5000, 30, false)
        );
        assert_eq!(
            r.result_seq, 0xFFFF_FFFF,
            "no frame stands behind these parts"
        );
    }
    let regs = plc.registers();
    assert_eq!(regs.acquisition_count, parts as u16);
    assert_eq!((regs.results_buffered, regs.error_code), (0, 0));
    assert!(!plc.bits().error);
    assert_eq!(stations[0].not_presented(), 0);
}

#[test]
fn a_plc_that_reconnects_mid_handshake_finds_the_presented_result_and_loses_nothing() {
    let (server, stations) = start(&config(8, true), 1);
    let addr = server.local_addr();
    for n in 0..4 {
        stations[0].send(&verdict(n, 500 + n, Reason::Ok));
    }
    let mut plc = Plc::connect(addr, 1);
    let first = plc.wait_result(WAIT).unwrap();
    assert_eq!(first.part_id, 500);
    drop(plc); // gone before ResultsAck
    let mut plc = Plc::connect(addr, 1);
    assert_eq!(
        plc.take_result(WAIT).unwrap().part_id,
        500,
        "still presented"
    );
    // Gone with ResultsAck high: the coil is the station's, not the connection's.
    plc.wait_result(WAIT).unwrap();
    plc.write_coil(common::plc::map::RESULTS_ACK, true);
    drop(plc);
    let mut plc = Plc::connect(addr, 1);
    assert!(!plc.bits().results_valid, "501 was acknowledged");
    assert_eq!(plc.registers().results_buffered, 2);
    plc.write_coil(common::plc::map::RESULTS_ACK, false);
    let rest: Vec<u32> = (0..2)
        .map(|_| plc.take_result(WAIT).unwrap().part_id)
        .collect();
    assert_eq!(rest, [502, 503]);
    assert!(
        plc.wait_result(Duration::from_millis(50)).is_none(),
        "nothing twice"
    );
    assert_eq!(stations[0].not_presented(), 0);
}

#[test]
fn a_plc_that_never_acks_fills_the_buffer_gets_an_error_and_later_results_are_counted_not_presented()
 {
    let (server, stations) = start(&config(3, true), 1);
    let mut plc = Plc::connect(server.local_addr(), 1);
    for n in 0..10 {
        stations[0].send(&verdict(n, 900 + n, Reason::Ok));
    }
    let (bits, regs) = (plc.bits(), plc.registers());
    assert!(bits.error && bits.results_valid);
    assert_eq!(
        (regs.error_code, regs.results_buffered, regs.result_part_id),
        (4, 3, 900)
    );
    assert_eq!(stations[0].not_presented(), 7);
    let seen: Vec<u32> = (0..3)
        .map(|_| plc.take_result(WAIT).unwrap().part_id)
        .collect();
    assert_eq!(seen, [900, 901, 902]);
    assert!(
        plc.wait_result(Duration::from_millis(50)).is_none(),
        "903..=909 are not presented"
    );
    assert!(plc.bits().error, "the error stays until ClearError");
    plc.clear_error();
    assert!(!plc.bits().error);
    assert_eq!(plc.registers().error_code, 0);
    stations[0].send(&verdict(10, 910, Reason::Ok));
    assert_eq!(plc.take_result(WAIT).unwrap().part_id, 910);
}

#[test]
fn a_trigger_with_trigger_enable_off_is_refused_with_an_error_code() {
    let (server, stations) = start(&config(8, true), 1);
    let mut plc = Plc::connect(server.local_addr(), 1);
    assert!(!plc.bits().trigger_ready);
    let refused = plc.trigger(42, Duration::from_millis(50));
    assert_eq!(refused, Err(TriggerRefused::NoAck { error_code: 1 }));
    assert_eq!(stations[0].desk().accepted(), 0);
    plc.clear_error();
    stations[0].desk().set_ready(false);
    plc.enable(true);
    let bits = plc.bits();
    assert!(!bits.online && !bits.trigger_ready);
    assert_eq!(
        plc.trigger(43, Duration::from_millis(50)),
        Err(TriggerRefused::NoAck { error_code: 2 })
    );
}

/// A cycle of a 2x3 layout (cavity 4 disabled) whose cavities `failed` fail.
fn cycle_verdict(number: u64, id: u64, failed: &[u16]) -> LineVerdict {
    let rects = (0..6)
        .map(|i| CavityRect {
            x: (i % 3) * 100,
            y: (i / 3) * 100,
            width: 90,
            height: 90,
        })
        .collect();
    let layout = CavityLayout::new(rects, &[4], 5, Some((2, 3))).unwrap();
    let mut cycle = CycleVerdicts::with_capacity(6);
    cycle.start(&layout);
    for n in layout.enabled() {
        let reason = if failed.contains(&n) {
            Reason::Defect
        } else {
            Reason::Ok
        };
        cycle.push(n, verdict(number, id, reason).decision);
    }
    LineVerdict {
        decision: cycle.overall(),
        cavities: Some(Arc::new(cycle)),
        ..verdict(number, id, Reason::Ok)
    }
}

#[test]
fn a_plc_reads_each_cycles_reject_mask_and_cavity_count_over_the_handshake() {
    let (server, stations) = start(&config(8, true), 1);
    let mut plc = Plc::connect(server.local_addr(), 1);
    // Without a layout the cavity registers read 0.
    stations[0].send(&verdict(0, 70, Reason::Defect));
    let plain = plc.take_result(Duration::from_secs(5)).expect("a result");
    assert_eq!(
        (plain.part_id, plain.reject_mask, plain.cavities),
        (70, 0, 0)
    );
    let cycles: [&[u16]; 4] = [&[2, 5], &[], &[1, 2, 3, 5, 6], &[6]];
    for (i, failed) in cycles.iter().enumerate() {
        stations[0].send(&cycle_verdict(i as u64 + 1, 71 + i as u64, failed));
    }
    for (i, failed) in cycles.iter().enumerate() {
        let r = plc
            .take_result(Duration::from_secs(5))
            .expect("a cycle's result");
        let mask = failed.iter().fold(0u64, |m, n| m | 1 << (n - 1));
        assert_eq!(
            (r.part_id, r.reject_mask, r.cavities, r.pass),
            (71 + i as u32, mask, 6, failed.is_empty()),
            "cycle {i}"
        );
        assert_eq!(r.reason_code, if failed.is_empty() { 0 } else { 1 });
    }
    // The mask's four words, high word first, as a PLC reads them raw.
    stations[0].send(&cycle_verdict(5, 80, &[1, 6]));
    plc.wait_result(Duration::from_secs(5))
        .expect("the last cycle");
    let raw = plc.try_read_inputs(11, 6).unwrap().unwrap();
    assert_eq!(raw, [0, 0, 0, 0, 0b10_0001, 6]);
    assert_eq!(plc.registers().active_recipe, 0);
}

#[test]
fn without_the_handshake_each_result_replaces_the_last_at_once() {
    let (server, stations) = start(&config(8, false), 1);
    let mut plc = Plc::connect(server.local_addr(), 1);
    for n in 0..20 {
        stations[0].send(&verdict(n, 300 + n, Reason::Ok));
        let regs = plc.registers();
        assert_eq!(
            (regs.result_part_id, regs.results_buffered),
            (300 + n as u32, 1)
        );
    }
    assert!(plc.bits().results_valid);
    assert_eq!(plc.registers().error_code, 0);
}

#[test]
fn two_plcs_at_once_each_run_their_own_camera() {
    let (server, stations) = start(&config(8, true), 2);
    let addr = server.local_addr();
    let runs: Vec<_> = stations
        .iter()
        .enumerate()
        .map(|(i, station)| {
            let station = Arc::clone(station);
            std::thread::spawn(move || {
                let line = LineDouble::start(station, Duration::from_millis(1));
                let unit = i as u8 + 1;
                let base = 1_000_000 * u32::from(unit);
                let mut plc = Plc::connect(addr, unit);
                plc.enable(true);
                let mut seen = Vec::new();
                for n in 0..60u32 {
                    plc.trigger(base + n, WAIT).unwrap();
                    seen.push(plc.take_result(WAIT).expect("a result").part_id);
                }
                line.stop();
                (base, seen)
            })
        })
        .collect();
    for run in runs {
        let (base, seen) = run.join().unwrap();
        assert_eq!(seen, (base..base + 60).collect::<Vec<_>>());
    }
    assert_eq!(stations[0].desk().accepted(), 60);
    assert_eq!(stations[1].desk().accepted(), 60);
    // Unit 3 is no camera; unit 0 and 255 neither.
    for unit in [0, 3, 255] {
        let mut plc = Plc::connect(addr, unit);
        assert_eq!(
            plc.try_read_inputs(0, 1).unwrap(),
            Err(ExceptionCode::GatewayTargetDevice)
        );
    }
}

/// Whether `stream` was closed by the server without an answer to a read.
fn closed_unanswered(mut stream: TcpStream) -> bool {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let _ = stream.write_all(&[0, 1, 0, 0, 0, 6, 1, 4, 0, 0, 0, 1]);
    let mut buf = [0u8; 32];
    matches!(stream.read(&mut buf), Ok(0) | Err(_))
}

#[test]
fn a_client_not_on_the_allow_list_is_closed_at_accept() {
    let mut refusing = config(8, true);
    refusing.allow = vec!["127.0.0.2".parse::<IpAddr>().unwrap()];
    let (server, _stations) = start(&refusing, 1);
    for _ in 0..3 {
        let stream = TcpStream::connect(server.local_addr()).unwrap();
        assert!(closed_unanswered(stream));
    }
    assert_eq!(
        server
            .counters()
            .refused_not_allowed
            .load(Ordering::Relaxed),
        3
    );
    assert_eq!(server.counters().accepted.load(Ordering::Relaxed), 0);

    let mut allowing = config(8, true);
    allowing.allow = vec!["127.0.0.1".parse::<IpAddr>().unwrap()];
    let (server, _stations) = start(&allowing, 1);
    let mut plc = Plc::connect(server.local_addr(), 1);
    assert!(plc.bits().online);
}

#[test]
fn a_full_server_closes_the_connection_silent_longest_and_idle_ones_time_out() {
    let mut capped = config(8, true);
    capped.max_connections = 2;
    capped.idle_timeout = Duration::from_secs(1);
    let (server, _stations) = start(&capped, 1);
    let addr = server.local_addr();
    let mut first = Plc::connect(addr, 1);
    let mut second = Plc::connect(addr, 1);
    first.bits();
    // The server's clock of requests counts milliseconds: the second's
    // request comes well after the first's.
    std::thread::sleep(Duration::from_millis(50));
    second.bits();
    // Full: the third is served, and the first (silent longest) closed for it.
    let mut third = Plc::connect(addr, 1);
    third.bits();
    assert!(
        !matches!(first.try_read_inputs(0, 1), Ok(Ok(_))),
        "the connection silent longest is closed"
    );
    second.bits();
    third.bits();
    assert_eq!(server.counters().evicted_idle.load(Ordering::Relaxed), 1);
    drop(second);
    drop(third);
    // The server notices those two closes when their tasks next read; until
    // then they hold the two places and a newcomer would evict one of them
    // (CI saw evicted_idle 2 here). Wait, bounded, until both are gone.
    wait_open_at_most(&server, 0, "closed connections still counted open");
    // Idle: a connection silent past the timeout is closed by the timeout
    // (alone on the server: no newcomer closes it).
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 8];
    let read = idle.read(&mut buf);
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // Counted just after the socket closed.
    let start = Instant::now();
    while server.counters().closed_idle.load(Ordering::Relaxed) == 0 {
        assert!(start.elapsed() < WAIT, "closed, but not as idle");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(server.counters().evicted_idle.load(Ordering::Relaxed), 1);
}

/// Issue 39: connections that connect and send nothing (a PLC's half-open
/// ones after a cable pull, a scanner) never keep a PLC out: with the
/// default cap of 4 and 64 of them open, a PLC is served within 1 s.
#[test]
fn sixty_four_silent_connections_never_keep_a_plc_out() {
    let (server, _stations) = start(&config(8, true), 1);
    let addr = server.local_addr();
    let silent: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Every one of them accepted before the PLC comes (bounded wait).
    let start = Instant::now();
    while server.counters().accepted.load(Ordering::Relaxed) < 64 {
        assert!(
            start.elapsed() < WAIT,
            "the 64 connections were not all accepted"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let start = Instant::now();
    let mut plc = Plc::connect(addr, 1);
    assert!(plc.bits().online);
    let served = start.elapsed();
    assert!(served < Duration::from_secs(1), "served after {served:?}");
    // 4 open at a time: each newcomer beyond them closed the one silent longest.
    assert_eq!(server.counters().evicted_idle.load(Ordering::Relaxed), 61);
    wait_open_at_most(&server, 4, "evicted connections still counted open");
    drop(silent);
}

#[test]
fn the_server_stops_within_its_bound_with_plcs_connected() {
    let (server, _stations) = start(&config(8, true), 1);
    let addr = server.local_addr();
    let mut plc = Plc::connect(addr, 1);
    plc.bits();
    let _silent = TcpStream::connect(addr).unwrap();
    let start = Instant::now();
    server.stop();
    assert!(start.elapsed() < STOP_WAIT, "{:?}", start.elapsed());
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "still listening"
    );
}

#[test]
fn a_taken_port_is_refused_with_what_to_do() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(8, true);
    cfg.listen = taken.local_addr().unwrap();
    let stations = vec![Arc::new(Station::new(
        1,
        Arc::new(TriggerDesk::new(0, Duration::ZERO)),
        &cfg,
        None,
    ))];
    let error = ModbusServer::start(&cfg, stations)
        .err()
        .expect("the port is taken");
    let text = error.to_string();
    assert!(
        text.contains(&cfg.listen.to_string()) && text.contains("another port"),
        "{text}"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    /// One Modbus TCP frame, `pdu` after the MBAP header for unit 1.
    fn frame(transaction: u16, unit: u8, pdu: &[u8]) -> Vec<u8> {
        let mut out = transaction.to_be_bytes().to_vec();
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&((pdu.len() + 1) as u16).to_be_bytes());
        out.push(unit);
        out.extend_from_slice(pdu);
        out
    }

    /// The answer to `request`: its PDU (header checked).
    fn exchange(mut stream: &TcpStream, transaction: u16, pdu: &[u8]) -> Vec<u8> {
        stream.write_all(&frame(transaction, 1, pdu)).unwrap();
        let mut header = [0u8; 7];
        stream
            .read_exact(&mut header)
            .expect("an answer to every framed request");
        assert_eq!(u16::from_be_bytes([header[0], header[1]]), transaction);
        assert_eq!((header[2], header[3], header[6]), (0, 0, 1));
        let length = u16::from_be_bytes([header[4], header[5]]) as usize;
        let mut answer = vec![0u8; length - 1];
        stream.read_exact(&mut answer).unwrap();
        answer
    }

    fn connect(addr: SocketAddr) -> TcpStream {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream
    }

    /// The server still answers a plain read on a new connection.
    fn still_answers(addr: SocketAddr) {
        let stream = connect(addr);
        let answer = exchange(&stream, 7, &[0x04, 0, 0, 0, 11]);
        assert_eq!(&answer[..2], &[0x04, 22]);
    }

    /// What the map and the spec say a read or write of `quantity` from
    /// `address` should get: `None` = a normal answer, else the exception.
    fn expected(function: u8, address: u16, quantity: u16) -> Option<u8> {
        let (size, max) = match function {
            0x01 => (5, 2000),
            0x02 => (10, 2000),
            0x03 => (3, 125),
            0x04 => (17, 125),
            _ => return Some(0x01),
        };
        if quantity == 0 || quantity > max {
            Some(0x03)
        } else if u32::from(address) + u32::from(quantity) > size {
            Some(0x02)
        } else {
            None
        }
    }

    #[test]
    fn well_formed_reads_get_the_answer_or_exception_the_map_says() {
        let (server, _stations) = start(&config(8, true), 1);
        let addr = server.local_addr();
        let stream = connect(addr);
        let mut runner = TestRunner::new(Config {
            cases: 300,
            failure_persistence: None,
            ..Config::default()
        });
        let strategy = (
            0u8..=8,
            prop_oneof![0u16..16, any::<u16>()],
            prop_oneof![0u16..16, any::<u16>()],
        );
        runner
            .run(&strategy, |(function, address, quantity)| {
                let mut pdu = vec![function];
                pdu.extend_from_slice(&address.to_be_bytes());
                pdu.extend_from_slice(&quantity.to_be_bytes());
                let answer = exchange(&stream, 1, &pdu);
                match (function, expected(function, address, quantity)) {
                    // 05/06 are writes: 4 bytes are address and value.
                    (0x05, _) => {
                        let legal_value = quantity == 0 || quantity == 0xFF00;
                        let want = if !legal_value {
                            Some(0x03)
                        } else if address >= 5 {
                            Some(0x02)
                        } else {
                            None
                        };
                        check(&answer, function, want)?;
                        if want.is_none() {
                            // Leave the coils as they were (no edges for the next case).
                            exchange(&stream, 2, &[0x05, 0, address as u8, 0, 0]);
                        }
                    }
                    (0x06, _) => check(
                        &answer,
                        function,
                        if address >= 3 { Some(0x02) } else { None },
                    )?,
                    (_, want) => check(&answer, function, want)?,
                }
                Ok(())
            })
            .unwrap();
        still_answers(addr);
    }

    fn check(answer: &[u8], function: u8, want: Option<u8>) -> Result<(), TestCaseError> {
        match want {
            Some(code) => prop_assert_eq!(answer, &[function | 0x80, code][..]),
            None => prop_assert_eq!(answer[0], function, "{:x?}", answer),
        }
        Ok(())
    }

    #[test]
    fn any_pdu_gets_an_answer_and_unknown_functions_get_exception_01() {
        let (server, _stations) = start(&config(8, true), 1);
        let addr = server.local_addr();
        let stream = connect(addr);
        let served = [0x01u8, 0x02, 0x03, 0x04, 0x05, 0x06, 0x0F, 0x10];
        let mut runner = TestRunner::new(Config {
            cases: 400,
            failure_persistence: None,
            ..Config::default()
        });
        let strategy = (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..40));
        runner
            .run(&strategy, |(function, rest)| {
                let mut pdu = vec![function];
                pdu.extend_from_slice(&rest);
                let answer = exchange(&stream, 9, &pdu);
                if !served.contains(&function) {
                    prop_assert_eq!(&answer, &[function | 0x80, 0x01]);
                } else if answer[0] != function {
                    prop_assert_eq!(answer.len(), 2);
                    prop_assert_eq!(answer[0], function | 0x80);
                    prop_assert!(answer[1] == 0x02 || answer[1] == 0x03, "{:x?}", answer);
                }
                Ok(())
            })
            .unwrap();
        // Writes of random coils may have left a trigger: the server is fine.
        still_answers(addr);
    }

    #[test]
    fn any_byte_sequence_leaves_the_server_running() {
        let (server, _stations) = start(&config(8, true), 1);
        let addr = server.local_addr();
        let mut runner = TestRunner::new(Config {
            cases: 150,
            failure_persistence: None,
            ..Config::default()
        });
        let strategy = prop_oneof![
            // Raw bytes, often not a frame at all.
            proptest::collection::vec(any::<u8>(), 0..300),
            // A frame cut short anywhere.
            (proptest::collection::vec(any::<u8>(), 1..20), 0usize..30).prop_map(|(pdu, cut)| {
                let whole = frame(3, 1, &pdu);
                whole[..cut.min(whole.len())].to_vec()
            }),
        ];
        runner
            .run(&strategy, |bytes| {
                let mut stream = connect(addr);
                stream
                    .set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                let _ = stream.write_all(&bytes);
                let _ = stream.shutdown(std::net::Shutdown::Write);
                // Read what comes until the server closes (or a short wait).
                let mut sink = Vec::new();
                let _ = stream.read_to_end(&mut sink);
                still_answers(addr);
                Ok(())
            })
            .unwrap();
    }
}

/// The CPU time the thread named `name` has used (schedstat: nanoseconds on a CPU).
fn thread_cpu(name: &str) -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            total += stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(total)
}

/// The Modbus server's CPU at 10 parts/s with a PLC polling every `poll`:
/// triggers every 100 ms, each result read and acknowledged, for `run`.
/// Returns the server thread's CPU time over the wall time, in percent.
fn server_cpu_percent(poll: Duration, run: Duration) -> (f64, usize, f64) {
    let (server, stations) = start(&config(8, true), 1);
    let line = LineDouble::start(Arc::clone(&stations[0]), Duration::from_millis(20));
    let mut plc = Plc::connect(server.local_addr(), 1);
    plc.enable(true);
    let cpu_before = thread_cpu("modbus");
    let requests_before = server.counters().requests.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut next_trigger = start;
    let mut id = 1u32;
    let mut results = 0;
    while start.elapsed() < run {
        if Instant::now() >= next_trigger {
            plc.trigger(id, WAIT).unwrap();
            id += 1;
            next_trigger += Duration::from_millis(100);
        }
        if plc.bits().results_valid {
            plc.registers();
            plc.ack();
            results += 1;
        }
        std::thread::sleep(poll);
    }
    let wall = start.elapsed();
    let cpu = thread_cpu("modbus") - cpu_before;
    let requests = server.counters().requests.load(Ordering::Relaxed) - requests_before;
    line.stop();
    drop(server);
    let per_second = requests as f64 / wall.as_secs_f64();
    (
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
        results,
        per_second,
    )
}

/// docs/PERFORMANCE.md, "Modbus server": the goal is at most 1% of a
/// CPU at 10 parts/s. Held to it with a PLC polling every 10 ms (a usual
/// Modbus poll); with a 1 ms poll (the bench's latency PLC) the figure is
/// printed, not held (1.6% on the loaded 2-core machine: see the docs).
/// Run with `cargo test --profile ci --features fault-injection --test
/// integration -- --ignored --nocapture plc_server::modbus_server_cpu`.
#[test]
#[ignore = "a measurement (10 s per poll rate); docs/PERFORMANCE.md"]
fn modbus_server_cpu_at_10_parts_per_second() {
    for poll_ms in [10u64, 1] {
        let (percent, results, per_second) =
            server_cpu_percent(Duration::from_millis(poll_ms), Duration::from_secs(10));
        println!(
            "Modbus server at 10 parts/s, PLC polling every {poll_ms} ms: {percent:.2}% of a CPU ({results} results, {per_second:.0} requests/s)"
        );
        assert!(results >= 95, "{results} results in 10 s");
        if poll_ms == 10 {
            assert!(percent <= 1.0, "{percent:.2}% of a CPU");
        }
    }
}
