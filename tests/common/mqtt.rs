//! A real MQTT broker and subscriber for the tests: Mosquitto from Debian's
//! packages, started as a child process on a free loopback port with its
//! own config file and killed when dropped; a rumqttc subscriber to
//! `<TOPIC>/#` that keeps every message with its receive time.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::{Client, Event, MqttOptions};

use super::free_port;

pub const MOSQUITTO: &str = "/usr/sbin/mosquitto";
pub const TOPIC: &str = "plant/line7/sealcheck";

pub fn wait_until(timeout: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ok()
}

/// A Mosquitto child process; killed when dropped.
pub struct Broker {
    pub port: u16,
    config: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Broker {
    /// `extra` goes into the config file after the listener (users, ACL, ...).
    pub fn start(dir: &Path, extra: &str) -> Broker {
        assert!(
            Path::new(MOSQUITTO).exists(),
            "{MOSQUITTO} missing: `make deps` installs mosquitto"
        );
        let port = free_port();
        let config = dir.join("mosquitto.conf");
        let text = format!(
            "listener {port} 127.0.0.1\npersistence false\nlog_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\n{extra}\n"
        );
        std::fs::write(&config, text).unwrap();
        let mut broker = Broker {
            port,
            config,
            log: dir.join("mosquitto.log"),
            child: None,
        };
        broker.restart();
        broker
    }

    pub fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(MOSQUITTO)
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start mosquitto");
        self.child = Some(child);
        self.wait_for_listener(self.port);
    }

    /// Waits until `port` (the listener of `start`, or one in `extra`) accepts.
    pub fn wait_for_listener(&self, port: u16) {
        assert!(
            wait_until(Duration::from_secs(10), || TcpStream::connect((
                "127.0.0.1",
                port
            ))
            .is_ok()),
            "mosquitto did not listen on {port}: {}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One message as the subscriber got it.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: SystemTime,
    pub topic: String,
    pub payload: String,
}

/// A subscriber to `<TOPIC>/#` that resubscribes after every reconnect.
pub struct Subscriber {
    received: Arc<Mutex<Vec<Received>>>,
    client: Client,
}

impl Subscriber {
    pub fn start(port: u16, credentials: Option<(&str, &str)>) -> Subscriber {
        let mut options = MqttOptions::new(format!("test-sub-{port}"), "127.0.0.1", port);
        options.set_keep_alive(Duration::from_secs(5));
        if let Some((user, password)) = credentials {
            options.set_credentials(user, password);
        }
        let (client, mut connection) = Client::new(options, 16);
        let received = Arc::new(Mutex::new(Vec::new()));
        let subscribed = Arc::new(Mutex::new(false));
        {
            let received = Arc::clone(&received);
            let subscribed = Arc::clone(&subscribed);
            let client = client.clone();
            std::thread::spawn(move || {
                loop {
                    match connection.recv() {
                        Err(_) => return,
                        Ok(Ok(Event::Incoming(Packet::ConnAck(_)))) => {
                            let _ = client.try_subscribe(format!("{TOPIC}/#"), QoS::AtLeastOnce);
                        }
                        Ok(Ok(Event::Incoming(Packet::SubAck(_)))) => {
                            *subscribed.lock().unwrap() = true;
                        }
                        Ok(Ok(Event::Incoming(Packet::Publish(p)))) => {
                            received.lock().unwrap().push(Received {
                                at: SystemTime::now(),
                                topic: String::from_utf8_lossy(&p.topic).into_owned(),
                                payload: String::from_utf8_lossy(&p.payload).into_owned(),
                            });
                        }
                        Ok(Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect))) => return,
                        Ok(Ok(_)) => {}
                        // The broker is away: retry a few times a second until the test ends.
                        Ok(Err(_)) => std::thread::sleep(Duration::from_millis(200)),
                    }
                }
            });
        }
        assert!(
            wait_until(Duration::from_secs(10), || *subscribed.lock().unwrap()),
            "test subscriber could not subscribe"
        );
        Subscriber { received, client }
    }

    pub fn messages(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn verdicts(&self) -> Vec<(SystemTime, serde_json::Value)> {
        self.messages()
            .into_iter()
            .filter(|m| m.topic == format!("{TOPIC}/verdict"))
            .map(|m| {
                let v = serde_json::from_str(&m.payload)
                    .unwrap_or_else(|e| panic!("not JSON: {}: {e}", m.payload));
                (m.at, v)
            })
            .collect()
    }

    pub fn statuses(&self) -> Vec<String> {
        self.messages()
            .into_iter()
            .filter(|m| m.topic == format!("{TOPIC}/status"))
            .map(|m| m.payload)
            .collect()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.client.try_disconnect();
    }
}
