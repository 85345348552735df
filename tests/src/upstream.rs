//! An HTTP/1.1 server on loopback that a test scripts: it records every request and answers
//! each as the test's function says. It stands in for the services a workflow calls.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// One request the upstream server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: String,
    pub at: Instant,
}

/// What the upstream answers: status line, extra headers, body, and how long it waits first.
pub struct Answer {
    pub status: &'static str,
    pub headers: Vec<(&'static str, &'static str)>,
    pub body: String,
    pub delay: Duration,
}

impl Answer {
    pub fn new(status: &'static str, body: &str) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
            delay: Duration::ZERO,
        }
    }
}

/// An HTTP/1.1 server on 127.0.0.1: one request per connection, each on its own thread.
pub struct Upstream {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    pub fn start(answer: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the upstream");
        let port = listener.local_addr().expect("upstream address").port();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (log, answer) = (seen.clone(), Arc::new(answer));
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (log, answer) = (log.clone(), answer.clone());
                thread::spawn(move || serve_one(conn, &log, answer.as_ref()));
            }
        });
        Upstream { port, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("upstream log").clone()
    }
}

fn serve_one(conn: TcpStream, log: &Mutex<Vec<Seen>>, answer: &dyn Fn(&Seen) -> Answer) {
    let Some(seen) = read_request(&conn) else {
        return;
    };
    log.lock().expect("upstream log").push(seen.clone());
    let a = answer(&seen);
    thread::sleep(a.delay);
    let mut head = format!(
        "HTTP/1.1 {}\r\ncontent-length: {}\r\nconnection: close\r\n",
        a.status,
        a.body.len()
    );
    for (name, value) in &a.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let mut conn = conn;
    let _ = conn.write_all(format!("{head}\r\n{}", a.body).as_bytes());
}

fn read_request(conn: &TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let Some((name, value)) = h.trim_end().split_once(':') else {
            break;
        };
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let length = headers.get("content-length").and_then(|l| l.parse().ok());
    let mut body = vec![0; length.unwrap_or(0)];
    reader.read_exact(&mut body).ok()?;
    let body = String::from_utf8_lossy(&body).into_owned();
    let at = Instant::now();
    Some(Seen {
        method,
        path,
        headers,
        body,
        at,
    })
}
