//! The real parts a scaled-out deployment runs beside the server — Debian's `redis-server`
//! and `haproxy` (installed by scripts/scaleout-deps.sh) — started by a test on loopback
//! ephemeral ports and stopped when dropped. Every wait is bounded.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nothing listens on right now, for a program that cannot report the one it bound.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("an ephemeral port")
        .port()
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name}");
}

/// A throwaway Redis without persistence.
pub struct Redis {
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Redis {
    pub fn start() -> Self {
        let mut redis = Self {
            port: free_port(),
            child: None,
            dir: tempfile::tempdir().unwrap(),
        };
        redis.restart();
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts it again on the same port (after [`Redis::kill`]), empty, and waits for PONG.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "redis is still running");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("redis-server is installed (scripts/scaleout-deps.sh)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.connection().is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} never answered", self.port);
    }

    /// A direct connection, for reading and planting values.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let mut connection = client.get_connection_with_timeout(Duration::from_secs(1))?;
        connection.set_read_timeout(Some(Duration::from_secs(2)))?;
        redis::cmd("PING").query::<String>(&mut connection)?;
        Ok(connection)
    }

    /// Keys under `prefix` that hold values (not claims).
    pub fn value_keys(&self, prefix: &str) -> Vec<String> {
        let mut connection = self.connection().unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query(&mut connection)
            .unwrap();
        keys.into_iter()
            .filter(|k| !k.starts_with(&format!("{prefix}lock:")))
            .collect()
    }

    /// How long `key` has to live, in ms: -1 for no expiry, -2 for no such key.
    pub fn ttl_ms(&self, key: &str) -> i64 {
        let mut connection = self.connection().unwrap();
        redis::cmd("PTTL").arg(key).query(&mut connection).unwrap()
    }

    /// SIGSTOP: the process keeps its socket and answers nothing, as a hung server would.
    pub fn freeze(&self) {
        signal(self.child.as_ref().expect("running"), "STOP");
    }

    pub fn thaw(&self) {
        signal(self.child.as_ref().expect("running"), "CONT");
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// haproxy with a config file the test wrote, listening on `port`.
pub struct Haproxy {
    pub url: String,
    child: Child,
    _config: tempfile::NamedTempFile,
}

impl Haproxy {
    /// Runs haproxy on `config`, which must bind `port`, and waits until it accepts connections.
    pub fn start(config: &str, port: u16) -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), config).unwrap();
        let check = Command::new("haproxy")
            .args(["-c", "-q", "-f"])
            .arg(file.path())
            .output()
            .expect("haproxy is installed (scripts/scaleout-deps.sh)");
        assert!(
            check.status.success(),
            "haproxy refuses the config: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(file.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start haproxy");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "haproxy never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            url: format!("http://127.0.0.1:{port}"),
            child,
            _config: file,
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `deploy/haproxy.cfg` with its frontend bound to `port` on loopback and its servers, in
/// order, at `servers` (`host:port`); everything else as shipped.
pub fn shipped_haproxy_config(port: u16, servers: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/haproxy.cfg");
    let text = std::fs::read_to_string(path).expect("deploy/haproxy.cfg");
    let mut servers = servers.iter();
    let mut out = String::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let rewritten = match words.first() {
            Some(&"bind") => format!("    bind 127.0.0.1:{port}"),
            Some(&"server") => {
                let address = servers.next().expect("a replica for every server line");
                let mut words = words.clone();
                words[2] = address;
                format!("    {}", words.join(" "))
            }
            _ => line.to_string(),
        };
        out.push_str(&rewritten);
        out.push('\n');
    }
    assert!(servers.next().is_none(), "a server line for every replica");
    out
}
