//! The script pool against hostile scripts: every script is stopped (the default 200 ms limit
//! plus the pool's 40 ms grace), answers the error it deserves, and leaves the pool able to
//! evaluate a normal condition right after. The hosts are the real `baton script-host` processes.

use node::events::eval::{check_condition, condition_holds, VALUE_PARAM};
use node::events::pool::{HostProgram, ScriptPool};
use node::events::script::{Limits, ScriptError};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The bound on answering a stopped script with the default limits. Unloaded, the answer comes
/// at about the limit plus the grace (each one is printed); this bound leaves room for a loaded
/// two-core machine running the whole suite, and is still far below what every script here
/// would take unstopped (minutes, or for ever).
const STOP_BOUND: Duration = Duration::from_secs(2);

fn pool(size: usize) -> ScriptPool {
    ScriptPool::new(Some(HostProgram::baton(env!("CARGO_BIN_EXE_baton"))), size)
}

/// A pool whose one host is started and has answered once.
async fn warm_pool() -> ScriptPool {
    let pool = pool(1);
    assert_healthy(&pool).await;
    pool
}

/// jq queries run in the same hosts: their outputs as a list, a query that does not parse or
/// fails on its input as an error, and one that would run for ever stopped at the deadline with
/// the host replaced.
#[tokio::test]
async fn jq_queries_answer_are_refused_or_are_stopped() {
    let pool = warm_pool().await;
    let limits = Limits::default();
    let input = json!({"items": [{"n": 1}, {"n": 2}]});
    let got = pool.query("[.items[].n] | add", &input, &limits).await;
    assert_eq!(got, Ok(json!([3])));
    let got = pool.query(".items[] | .n * 10", &input, &limits).await;
    assert_eq!(got, Ok(json!([10, 20])));
    let got = pool.query(".items | {", &input, &limits).await;
    assert!(matches!(got, Err(ScriptError::Syntax(_))), "{got:?}");
    let got = pool.query(".items + 1", &input, &limits).await;
    assert!(matches!(got, Err(ScriptError::Failed(_))), "{got:?}");
    let started = Instant::now();
    let got = pool.query("last(range(1e15))", &input, &limits).await;
    assert!(matches!(got, Err(ScriptError::TimedOut(_))), "{got:?}");
    assert!(started.elapsed() < STOP_BOUND, "{:?}", started.elapsed());
    assert_healthy(&pool).await;
}

/// A normal condition evaluates correctly.
async fn assert_healthy(pool: &ScriptPool) {
    let root = json!({"status": "READY"});
    let started = Instant::now();
    let got = pool
        .evaluate("$.status == 'READY'", &root, &Limits::default())
        .await;
    assert_eq!(
        got,
        Ok(json!(true)),
        "a normal condition after a hostile one"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Runs `script` with the default limits; answers its outcome once the pool is warm again, and
/// checks that the answer came within [`STOP_BOUND`].
async fn stopped(pool: &ScriptPool, script: &str) -> (Result<Value, ScriptError>, Duration) {
    let started = Instant::now();
    let got = pool.evaluate(script, &json!({}), &Limits::default()).await;
    let took = started.elapsed();
    println!("{took:>8.1?}  {:<12} {script}", kind(&got));
    assert!(
        took < STOP_BOUND,
        "{script}: answered after {took:?}: {got:?}"
    );
    assert!(
        !matches!(
            got,
            Err(ScriptError::HostFailed(_) | ScriptError::Syntax(_))
        ),
        "{script}: {got:?}"
    );
    assert_healthy(pool).await;
    (got, took)
}

fn kind(r: &Result<Value, ScriptError>) -> &'static str {
    match r {
        Ok(_) => "value",
        Err(ScriptError::TimedOut(_)) => "timed out",
        Err(ScriptError::OutOfMemory) => "memory",
        Err(ScriptError::Failed(_)) => "failed",
        Err(ScriptError::Syntax(_)) => "syntax",
        Err(ScriptError::OutputTooLarge { .. }) => "output",
        Err(ScriptError::NotJson(_)) => "not json",
        Err(ScriptError::HostFailed(_)) => "host failed",
    }
}

#[tokio::test]
async fn infinite_loops_time_out() {
    let pool = warm_pool().await;
    for script in [
        "while (true) {}",
        "for (;;) { try { while (true) {} } catch (e) {} finally { 'again' } }",
        "var o = { toJSON() { for (;;) {} } }; o",
    ] {
        let (got, _) = stopped(&pool, script).await;
        assert_eq!(got, Err(ScriptError::TimedOut(Duration::from_millis(200))));
    }
}

#[tokio::test]
async fn the_slice_of_a_fake_length_is_killed() {
    let pool = warm_pool().await;
    let before = pool.stats();
    let (got, _) = stopped(&pool, "Array.prototype.slice.call({length: 2**32 - 2})").await;
    assert_eq!(got, Err(ScriptError::TimedOut(Duration::from_millis(200))));
    let after = pool.stats();
    assert_eq!(after.killed, before.killed + 1, "the host was killed");
    assert!(after.started > before.started, "and replaced");
}

#[tokio::test]
async fn allocations_run_out_of_memory() {
    let pool = warm_pool().await;
    for script in [
        "var a = []; while (true) a.push('x'.repeat(1024) + a.length);",
        "var a = []; for (;;) a.push({ n: a.length });",
        "new ArrayBuffer(2**31)",
        "new Array(2**32 - 1).fill(0)",
    ] {
        let (got, _) = stopped(&pool, script).await;
        assert!(
            matches!(
                got,
                Err(ScriptError::OutOfMemory | ScriptError::Failed(_) | ScriptError::TimedOut(_))
            ),
            "{script}: {got:?}"
        );
    }
    let (got, _) = stopped(&pool, "var a = []; for (;;) a.push({ n: a.length });").await;
    assert_eq!(got, Err(ScriptError::OutOfMemory));
}

#[tokio::test]
async fn huge_strings_run_out_of_memory() {
    let pool = warm_pool().await;
    for script in [
        "var s = 'x'; while (true) s = s.repeat(2);",
        "'x'.repeat(2**30)",
        "var s = 'ab'; for (;;) s += s;",
        "'x'.padEnd(2**30)",
    ] {
        let (got, _) = stopped(&pool, script).await;
        assert!(
            matches!(got, Err(ScriptError::OutOfMemory | ScriptError::Failed(_))),
            "{script}: {got:?}"
        );
    }
}

#[tokio::test]
async fn catastrophic_regexes_are_stopped() {
    let pool = warm_pool().await;
    for script in [
        "/^(a+)+$/.test('a'.repeat(40) + '!')",
        "/(x+x+)+y/.test('x'.repeat(5000))",
        "/^(\\w+\\s?)*$/.test('an input that will never match the pattern at all!'.repeat(4))",
    ] {
        let (got, _) = stopped(&pool, script).await;
        assert_eq!(
            got,
            Err(ScriptError::TimedOut(Duration::from_millis(200))),
            "{script}"
        );
    }
}

#[tokio::test]
async fn deep_recursion_is_out_of_memory() {
    let pool = warm_pool().await;
    for script in [
        "function f(n) { return f(n + 1) + 1; } f(0)",
        "var o = {}; o.toString = function () { return String(o); }; String(o)",
        "JSON.parse('['.repeat(1e6))",
    ] {
        let (got, _) = stopped(&pool, script).await;
        assert!(
            matches!(got, Err(ScriptError::OutOfMemory | ScriptError::Failed(_))),
            "{script}: {got:?}"
        );
    }
}

/// Arguments that make each `Array.prototype` method walk its whole receiver.
fn walking_arguments(method: &str) -> &'static str {
    match method {
        "every" => "() => true",
        "some" | "find" | "findIndex" | "findLast" | "findLastIndex" => "() => false",
        "filter" | "forEach" | "map" | "flatMap" => "x => x",
        "reduce" | "reduceRight" => "(a, b) => a, 0",
        "sort" | "toSorted" => "(a, b) => 0",
        "includes" | "indexOf" | "lastIndexOf" => "'never there'",
        "fill" => "1",
        "copyWithin" => "0, 1",
        "splice" | "toSpliced" => "0, 1",
        "slice" => "0",
        "with" => "0, 1",
        "unshift" | "push" => "1",
        "join" => "''",
        "at" => "-1",
        "concat" => "[]",
        _ => "",
    }
}

/// Every method of `Array.prototype`, as the sandbox's QuickJS has them.
async fn array_methods(pool: &ScriptPool) -> Vec<String> {
    let names = pool
        .evaluate(
            "Object.getOwnPropertyNames(Array.prototype).filter(n => typeof Array.prototype[n] == 'function' && n != 'constructor')",
            &json!({}),
            &Limits::default(),
        )
        .await
        .expect("the method names");
    let names: Vec<String> = serde_json::from_value(names).expect("strings");
    assert!(names.len() >= 30, "{names:?}");
    names
}

#[tokio::test]
async fn fake_lengths_through_every_array_method() {
    let pool = warm_pool().await;
    let methods = array_methods(&pool).await;
    let mut slowest = Duration::ZERO;
    for length in ["2**32 - 2", "2**53 - 1"] {
        for m in &methods {
            let script = format!(
                "Array.prototype[{m:?}].call({{length: {length}}}, {})",
                walking_arguments(m)
            );
            let (_, took) = stopped(&pool, &script).await;
            slowest = slowest.max(took);
        }
    }
    println!("slowest answer: {slowest:?} over {} methods", methods.len());
}

#[tokio::test]
async fn fake_lengths_through_typed_arrays_strings_and_apply() {
    let pool = warm_pool().await;
    let fake = "{length: 2**32 - 2}";
    let scripts = [
        format!("Uint8Array.from({fake})"),
        format!("new Uint8Array(1).set({fake})"),
        format!("new Float64Array({fake})"),
        format!("Array.from({fake})"),
        format!("Array.of.apply(null, {fake})"),
        format!("String.fromCharCode.apply(null, {fake})"),
        format!("String.fromCodePoint.apply(null, {fake})"),
        format!("String.raw({{raw: {fake}}})"),
        format!("''.concat.apply('', {fake})"),
        format!("Math.max.apply(null, {fake})"),
        format!("Reflect.apply(function () {{}}, null, {fake})"),
        format!("new (Function.prototype.bind.apply(Array, [null].concat([1])))().concat({fake})"),
        "Uint8Array.prototype.join.call(new Uint8Array(2**24), '')".to_owned(),
        format!("Object.assign([], {fake})"),
        format!("Promise.all({{ [Symbol.iterator]: () => Array.prototype.values.call({fake}) }})"),
        format!("[...Array.prototype.values.call({fake})]"),
    ];
    for script in &scripts {
        let _ = stopped(&pool, script).await;
    }
}

#[tokio::test]
async fn a_host_killed_from_outside_is_replaced() {
    let pool = warm_pool().await;
    for pid in pool.idle_pids() {
        let status = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }
    // The dead host is noticed when it is next taken (or the evaluation on it fails and the
    // next one starts afresh): within two tries, a normal condition works.
    let root = json!({"status": "READY"});
    let mut answers = Vec::new();
    for _ in 0..2 {
        let got = pool
            .evaluate("$.status == 'READY'", &root, &Limits::default())
            .await;
        answers.push(got.clone());
        if got == Ok(json!(true)) {
            break;
        }
    }
    assert_eq!(answers.last(), Some(&Ok(json!(true))), "{answers:?}");
    assert!(pool.stats().started >= 2);
}

#[tokio::test]
async fn hosts_are_reused_and_bounded() {
    let pool = pool(2);
    let root = json!({"n": 1});
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (pool, root) = (pool.clone(), root.clone());
        tasks.push(tokio::spawn(async move {
            pool.evaluate("$.n + 1", &root, &Limits::default()).await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("joined"), Ok(json!(2)));
    }
    assert!(pool.stats().started <= 2, "{:?}", pool.stats());
    assert!(pool.idle_pids().len() <= 2);
}

#[tokio::test]
async fn shutdown_fails_a_stuck_evaluation_at_once() {
    let pool = warm_pool().await;
    let stuck = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let long = Limits {
                time: Duration::from_secs(60),
                ..Limits::default()
            };
            pool.evaluate(
                "Array.prototype.slice.call({length: 2**32 - 2})",
                &json!({}),
                &long,
            )
            .await
        })
    };
    // Wait until the host is busy (no idle host left), then shut down.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pool.idle_pids().is_empty() {
        assert!(Instant::now() < deadline, "the evaluation never started");
        tokio::task::yield_now().await;
    }
    let started = Instant::now();
    pool.shutdown();
    let got = tokio::time::timeout(Duration::from_secs(5), stuck)
        .await
        .expect("the evaluation ends at once")
        .expect("joined");
    assert!(matches!(got, Err(ScriptError::HostFailed(_))), "{got:?}");
    println!("shutdown answered after {:?}", started.elapsed());
    assert!(matches!(
        pool.evaluate("1", &json!({}), &Limits::default()).await,
        Err(ScriptError::HostFailed(_))
    ));
}

#[tokio::test]
async fn conditions_are_javascript_on_the_payload() {
    let pool = pool(1);
    let ready = json!({"status": "READY"});
    let other = json!({"status": "WAITING"});
    let c = Some("$.status == 'READY'");
    assert!(condition_holds(&pool, None, c, &ready).await.expect("ok"));
    assert!(!condition_holds(&pool, None, c, &other).await.expect("ok"));
    assert!(condition_holds(&pool, None, None, &other)
        .await
        .expect("ok"));
    assert!(condition_holds(&pool, None, Some("  "), &other)
        .await
        .expect("ok"));
    let flags = json!({"ready": true, "done": 0, "nested": {"ok": "yes"}});
    let vp = Some(VALUE_PARAM);
    assert!(condition_holds(&pool, vp, Some("ready"), &flags)
        .await
        .expect("ok"));
    assert!(!condition_holds(&pool, vp, Some("done"), &flags)
        .await
        .expect("ok"));
    assert!(condition_holds(&pool, vp, Some("nested.ok"), &flags)
        .await
        .expect("ok"));
    assert!(check_condition(&pool, "$.status == 'READY'").await.is_ok());
    assert!(check_condition(&pool, "$.status == ").await.is_err());
    assert!(matches!(
        condition_holds(&pool, None, Some("while (true) {}"), &ready).await,
        Err(ScriptError::TimedOut(_))
    ));
}

#[tokio::test]
async fn a_missing_program_is_a_host_failure() {
    let pool = ScriptPool::new(Some(HostProgram::baton("/nonexistent/baton")), 1);
    assert!(matches!(
        pool.evaluate("1", &json!({}), &Limits::default()).await,
        Err(ScriptError::HostFailed(_))
    ));
}

/// What a warm host costs per evaluation against evaluating in the calling thread, and what
/// starting a host costs: printed for the record, asserted only loosely.
#[tokio::test]
async fn cost_per_evaluation() {
    const N: u32 = 200;
    let root = json!({"status": "READY", "order": {"items": [1, 2, 3]}});
    let cond = "$.status == 'READY' && $.order.items.length > 2";
    let limits = Limits::default();
    let started = Instant::now();
    for _ in 0..N {
        let got = node::events::script::evaluate(cond, &root, &limits);
        assert_eq!(got, Ok(json!(true)));
    }
    let in_thread = started.elapsed() / N;
    let pool = warm_pool().await;
    let started = Instant::now();
    for _ in 0..N {
        assert_eq!(pool.evaluate(cond, &root, &limits).await, Ok(json!(true)));
    }
    let pooled = started.elapsed() / N;
    let started = Instant::now();
    for _ in 0..10 {
        let fresh = pool_of_one();
        assert_eq!(fresh.evaluate(cond, &root, &limits).await, Ok(json!(true)));
    }
    let spawned = started.elapsed() / 10;
    println!("per evaluation: in thread {in_thread:?}, warm host {pooled:?}, new host each time {spawned:?}");
    assert!(pooled < Duration::from_millis(100), "{pooled:?}");
}

fn pool_of_one() -> ScriptPool {
    pool(1)
}

#[tokio::test]
async fn a_runaway_allocation_past_quickjs_is_bounded_by_the_host() {
    let pool = warm_pool().await;
    // No QuickJS memory limit: only the host's own limit stops it.
    let unlimited = Limits {
        time: Duration::from_secs(20),
        memory_bytes: 0,
        ..Limits::default()
    };
    let script = "var a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length);";
    let started = Instant::now();
    let got = pool.evaluate(script, &json!({}), &unlimited).await;
    println!("{:?}  {}", started.elapsed(), kind(&got));
    assert!(
        matches!(
            got,
            Err(ScriptError::OutOfMemory | ScriptError::HostFailed(_))
        ),
        "{got:?}"
    );
    assert_healthy(&pool).await;
}

/// A host whose node is gone (nobody kills it) stops a stuck script itself: its watchdog aborts
/// it [`SELF_KILL_GRACE`] after the script's limit.
#[test]
fn an_orphaned_stuck_host_aborts_itself() {
    use node::events::frame::{self, Lang, RequestRef};
    use node::events::host::SELF_KILL_GRACE;
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg(HostProgram::SUBCOMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the host starts");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stdin = child.stdin.take().expect("stdin");
    let hello = frame::read_blocking(&mut stdout).expect("reads");
    assert_eq!(hello.as_deref(), Some(frame::HELLO));
    let limits = Limits {
        time: Duration::from_millis(100),
        ..Limits::default()
    };
    let request = RequestRef {
        lang: Lang::Js,
        script: "Array.prototype.slice.call({length: 2**32 - 2})",
        root: &json!({}),
        limits: &limits,
    };
    let body = serde_json::to_vec(&request).expect("json");
    let started = Instant::now();
    frame::write_blocking(&mut stdin, &body).expect("writes");
    let bound = limits.time + SELF_KILL_GRACE + Duration::from_secs(3);
    let status = loop {
        if let Some(status) = child.try_wait().expect("waits") {
            break status;
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            panic!("the host still runs after {:?}", started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    println!("aborted itself after {:?}: {status}", started.elapsed());
    assert!(!status.success());
    assert!(started.elapsed() >= limits.time + SELF_KILL_GRACE);
    let mut rest = Vec::new();
    let _ = stdout.read_to_end(&mut rest);
    assert!(rest.is_empty(), "no answer: {rest:?}");
}
