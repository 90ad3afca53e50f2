//! A camera that can go away: a GStreamer RTSP server in a child process
//! (the calling test binary re-run), on a loopback port.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// When `SEALCHECK_TEST_RTSP_PORT` is set, this process is the RTSP camera of
/// another test (`RtspCamera`) and serves until killed; otherwise it returns
/// at once. tests/integration.rs calls it from its test `rtsp_camera_process`, which
/// `RtspCamera::start` re-runs.
pub fn serve_when_asked() {
    let Ok(port) = std::env::var("SEALCHECK_TEST_RTSP_PORT") else {
        return;
    };
    use gstreamer as gst;
    use gstreamer_rtsp_server as rtsp;
    use gstreamer_rtsp_server::prelude::*;
    gst::init().unwrap();
    let main_loop = gst::glib::MainLoop::new(None, false);
    let server = rtsp::RTSPServer::new();
    server.set_address("127.0.0.1");
    server.set_service(&port);
    let factory = rtsp::RTSPMediaFactory::new();
    // A small live picture as MJPEG over RTP: plugins-good only, quick to decode.
    let fps = std::env::var("SEALCHECK_TEST_RTSP_FPS").unwrap_or_else(|_| "15".into());
    factory.set_launch(&format!(
        "( videotestsrc is-live=true pattern=ball ! video/x-raw,format=I420,width=64,height=48,framerate={fps}/1 \
         ! jpegenc ! rtpjpegpay name=pay0 pt=26 )"
    ));
    factory.set_shared(true);
    server
        .mount_points()
        .expect("the server has mount points")
        .add_factory("/line", factory);
    let _source = server.attach(None).expect("the RTSP server listens");
    main_loop.run();
}

/// The RTSP camera as a child process on `port`; killed when dropped.
pub struct RtspCamera {
    child: Child,
}

impl RtspCamera {
    pub fn start(port: u16) -> RtspCamera {
        RtspCamera::start_at(port, 15)
    }

    /// A camera of `fps` frames per second.
    pub fn start_at(port: u16, fps: u32) -> RtspCamera {
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["rtsp_camera_process", "--exact", "--test-threads=1"])
            .env("SEALCHECK_TEST_RTSP_PORT", port.to_string())
            .env("SEALCHECK_TEST_RTSP_FPS", fps.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the RTSP camera process");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the RTSP camera did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        RtspCamera { child }
    }

    /// The camera freezes: its process is stopped (SIGSTOP), so no frame
    /// comes while its sockets stay open, as a hung camera does.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// A frozen camera goes on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        let status = Command::new("kill")
            .args([which, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {which} the RTSP camera: {status}");
    }

    /// The camera goes away: its process dies and its sockets close.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RtspCamera {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
