//! The script sandbox: evaluates event-handler conditions (`$.status == 'READY'`) and Conductor's
//! "javascript" scripts with an embedded QuickJS, the payload bound to the global `$`.
//!
//! Every evaluation gets a fresh QuickJS runtime and context, so nothing a script does outlives it,
//! and runs under [`Limits`]: a deadline enforced by QuickJS's interrupt handler (which stops even
//! `while(true){}`, and which a script cannot catch), a memory limit, a stack limit and a cap on the
//! size of the result. A script is global code in sloppy mode, as in Conductor; its value is its
//! completion value, so both an expression and `(function(){ ... })()` work. A one-line prelude
//! runs first (see `STARTED`), so a leading `'use strict'` has no effect.
//!
//! The interrupt handler only runs between bytecodes and calls, so the built-ins that loop in C over
//! an unbounded `length` are hardened first (see `HARDENING`) and `Proxy` is absent. What remains
//! is bounded: the longest single native step we know of, turning a BigInt of QuickJS's
//! maximum size (about a million bits) into decimal, takes a few seconds past the deadline.
//!
//! It is not a JavaScript runtime: there are no modules, no I/O, no timers, and promise jobs never
//! run. [`evaluate`] is blocking and CPU-bound (about 0.2 ms for a simple condition, most of it
//! creating the context). These limits are the first line only: a node never calls
//! [`evaluate`] on its own threads but in a script host process
//! ([`ScriptPool`](super::pool::ScriptPool)), which it kills when the deadline passes.

use rquickjs::context::EvalOptions;
use rquickjs::convert::Coerced;
use rquickjs::{Context, Ctx, Runtime};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bounds on one evaluation.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// Wall-clock time from the start of [`evaluate`]; past it the script is stopped.
    pub time: Duration,
    /// Memory of the whole QuickJS runtime, the bound payload included (0: unlimited).
    pub memory_bytes: usize,
    /// JavaScript stack depth (0: unlimited). The calling thread needs more stack than this.
    pub stack_bytes: usize,
    /// Size of the result as JSON text.
    pub output_bytes: usize,
}

impl Default for Limits {
    /// 200 ms, 16 MiB of memory, 256 KiB of stack, 256 KiB of output.
    fn default() -> Self {
        Limits {
            time: Duration::from_millis(200),
            memory_bytes: 16 << 20,
            stack_bytes: 256 << 10,
            output_bytes: 256 << 10,
        }
    }
}

impl Limits {
    /// What a task's script or query may use (INLINE, LAMBDA, SWITCH's script, DO_WHILE's
    /// condition, JSON_JQ_TRANSFORM): 1 s, 32 MiB of memory, 256 KiB of stack, and a result no
    /// larger than a task's output may be.
    pub fn task() -> Limits {
        Limits {
            time: Duration::from_secs(1),
            memory_bytes: 32 << 20,
            stack_bytes: 256 << 10,
            output_bytes: proto::limits::PAYLOAD_BYTES_MAX,
        }
    }
}

/// Why a script gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ScriptError {
    /// The script does not parse.
    #[error("script does not parse: {0}")]
    Syntax(String),
    /// It threw, or referenced something undefined.
    #[error("script failed: {0}")]
    Failed(String),
    /// It ran past the time limit.
    #[error("script ran longer than {} ms and was stopped", .0.as_millis())]
    TimedOut(Duration),
    /// It exceeded the memory (or stack) limit.
    #[error("script used more memory or stack than its limit allows and was stopped")]
    OutOfMemory,
    /// Its result is larger than the output limit.
    #[error("script result is larger than the limit of {limit} bytes of JSON")]
    OutputTooLarge { limit: usize },
    /// Its result is not representable as JSON (a function, a symbol...).
    #[error("script result is not representable as JSON: {0}")]
    NotJson(String),
    /// The process the script ran in could not be started, or died without an answer (see
    /// `events::pool`); another try may succeed.
    #[error("the script host failed: {0}")]
    HostFailed(String),
}

/// Longest message kept from a script's exception: the script chooses its messages.
const MESSAGE_BYTES_MAX: usize = 1024;

/// Global that the prelude sets once the script has parsed and starts to run, so that a
/// `SyntaxError` thrown at run time (`JSON.parse('{')`) is not taken for the script's own.
const STARTED: &str = "__baton_script_started";

/// How close to the memory limit the runtime must be for a bare `null` exception to count as
/// running out of memory (QuickJS throws `null` when it cannot allocate the error itself).
const MEMORY_SLACK_BYTES: usize = 64 << 10;

/// Bytes of memory a dense array element takes at least: a longer array than `memory_bytes /
/// ELEMENT_BYTES_MIN` cannot be real, only sparse or a fake `{length: 2**53 - 1}`.
const ELEMENT_BYTES_MIN: usize = 16;

/// Run in every context before the script, with the longest array length allowed and
/// [`GUARDED`].
///
/// QuickJS polls its interrupt handler from bytecode and calls, but a few built-ins loop in C
/// over `length` alone: `Array.prototype.join.call({length: 2**53 - 1}, '')` would run for years
/// without allocating. This removes `Proxy` (a proxy can report one length to a guard and another
/// to the loop) and replaces those built-ins with stubs that compile [`GUARDED`] on first use
/// (compiling costs about 50 ns a byte, too much to pay in every evaluation), handing it the
/// intrinsics as they were before the script ran. Arrays also get Java's `get(i)` and `size()`,
/// as Conductor's scripts see them. Nothing else is changed.
const HARDENING: &str = r#"(function (max, source) {
  'use strict';
  var apply = Reflect.apply, defineProperty = Object.defineProperty,
    getPrototypeOf = Object.getPrototypeOf, getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor,
    indirectEval = eval, A = Array.prototype, I = getPrototypeOf(getPrototypeOf([][Symbol.iterator]())),
    h = { __proto__: null, max: max, apply: apply, defineProperty: defineProperty,
      getPrototypeOf: getPrototypeOf, getOwnPropertyDescriptor: getOwnPropertyDescriptor,
      hasOwn: Object.hasOwn, isArray: Array.isArray, toObject: Object, trunc: Math.trunc,
      spreadable: Symbol.isConcatSpreadable, RangeError: RangeError, TypeError: TypeError,
      typedLength: getOwnPropertyDescriptor(getPrototypeOf(Uint8Array.prototype), 'length').get,
      JSON: JSON, originals: { __proto__: null } },
    impl;
  function stub(owner, name, length) {
    h.originals[name] = owner[name];
    var f = { [name]() {
      if (impl === undefined) impl = indirectEval(source)(h);
      return apply(impl[name], this, arguments);
    } }[name];
    defineProperty(f, 'length', { __proto__: null, value: length });
    defineProperty(owner, name, { __proto__: null, value: f, writable: true, configurable: true });
  }
  delete globalThis.Proxy;
  var names = ['join', 'toLocaleString', 'reverse', 'copyWithin', 'sort', 'splice', 'shift', 'unshift'];
  for (var i = 0; i < names.length; i++) stub(A, names[i], A[names[i]].length);
  stub(A, 'concat', 1);
  stub(A, 'flat', 0);
  stub(A, 'flatMap', 1);
  stub(JSON, 'stringify', 3);
  if (typeof I.drop === 'function') stub(I, 'drop', 1);
  // Conductor hands its scripts JSON arrays as Java lists: list.get(i) and list.size() work there.
  defineProperty(A, 'get', { __proto__: null, writable: true, configurable: true,
    value: function get(i) { return this[i]; } });
  defineProperty(A, 'size', { __proto__: null, writable: true, configurable: true,
    value: function size() { return this.length; } });
})"#;

/// The built-ins that [`HARDENING`] stubs, given the intrinsics `h` from before the script ran.
///
/// Those whose C loop reads `length` once are guarded: the guard reads the length without running
/// script code (a data property holding a primitive, or the typed-array getter), so the loop sees
/// the length that was checked. `concat`, `flat`, `flatMap` and `Iterator.prototype.drop`, whose
/// loops reach script code between length reads, become JavaScript, which the interrupt handler
/// stops.
const GUARDED: &str = r#"(function (h) {
  'use strict';
  var apply = h.apply, defineProperty = h.defineProperty, getPrototypeOf = h.getPrototypeOf,
    getOwnPropertyDescriptor = h.getOwnPropertyDescriptor, hasOwn = h.hasOwn, isArray = h.isArray,
    toObject = h.toObject, trunc = h.trunc, spreadable = h.spreadable, RangeErr = h.RangeError,
    TypeErr = h.TypeError, typedLength = h.typedLength, originals = h.originals, max = h.max,
    MAX_SAFE = 9007199254740991, impl = { __proto__: null };

  function lengthOf(o, name) {
    for (var p = o; p !== null; p = getPrototypeOf(p)) {
      var d = getOwnPropertyDescriptor(p, 'length'), n;
      if (d === undefined) continue;
      if (hasOwn(d, 'value')) {
        if (typeof d.value === 'object' || typeof d.value === 'function') {
          throw new TypeErr(name + ': the script sandbox needs a length that is a primitive');
        }
        n = +d.value;
      } else if (d.get === typedLength) {
        n = apply(typedLength, o, []);
      } else {
        throw new TypeErr(name + ': the script sandbox does not allow a length getter here');
      }
      if (n > max) {
        throw new RangeErr(name + ': length ' + n + ' is over the script sandbox limit of ' + max);
      }
      return;
    }
  }
  function guard(name) {
    var original = originals[name];
    impl[name] = function () {
      lengthOf(toObject(this), 'Array.prototype.' + name);
      return apply(original, this, arguments);
    };
  }
  function toLength(x) {
    var n = trunc(+x);
    return n > 0 ? (n < MAX_SAFE ? n : MAX_SAFE) : 0;
  }
  function define(o, k, v) {
    defineProperty(o, k, { __proto__: null, value: v, writable: true, enumerable: true, configurable: true });
  }
  function isSpreadable(e) {
    if (e === null || (typeof e !== 'object' && typeof e !== 'function')) return false;
    var s = e[spreadable];
    return s !== undefined ? !!s : isArray(e);
  }
  function flatten(out, source, depth, fn, thisArg) {
    for (var k = 0, len = toLength(source.length); k < len; k++) {
      if (!(k in source)) continue;
      var e = fn === undefined ? source[k] : apply(fn, thisArg, [source[k], k, source]);
      if (depth > 0 && isArray(e)) flatten(out, e, depth - 1, undefined, undefined);
      else define(out, out.length, e);
    }
    return out;
  }

  guard('join'); guard('toLocaleString'); guard('reverse'); guard('copyWithin');
  guard('sort'); guard('splice'); guard('shift'); guard('unshift');
  impl.stringify = function (value, replacer, space) {
    if (isArray(replacer)) lengthOf(replacer, 'JSON.stringify');
    return apply(originals.stringify, h.JSON, arguments);
  };
  impl.concat = function () {
    var out = [], n = 0, o = toObject(this);
    for (var i = -1; i < arguments.length; i++) {
      var e = i < 0 ? o : arguments[i];
      if (isSpreadable(e)) {
        var len = toLength(e.length);
        if (n + len > MAX_SAFE) throw new TypeErr('Array.prototype.concat: the result is too long');
        for (var k = 0; k < len; k++, n++) if (k in e) define(out, n, e[k]);
      } else {
        if (n >= MAX_SAFE) throw new TypeErr('Array.prototype.concat: the result is too long');
        define(out, n++, e);
      }
    }
    out.length = n;
    return out;
  };
  impl.flat = function () {
    var depth = arguments.length > 0 && arguments[0] !== undefined ? trunc(+arguments[0]) : 1;
    return flatten([], toObject(this), depth !== depth ? 0 : depth, undefined, undefined);
  };
  impl.flatMap = function (fn) {
    var o = toObject(this);
    if (typeof fn !== 'function') throw new TypeErr('Array.prototype.flatMap: not a function');
    return flatten([], o, 1, fn, arguments[1]);
  };
  impl.drop = function (limit) {
    if (this === null || (typeof this !== 'object' && typeof this !== 'function')) {
      throw new TypeErr('Iterator.prototype.drop: not an object');
    }
    var n = +limit;
    if (n !== n) throw new RangeErr('Iterator.prototype.drop: the limit is not a number');
    n = trunc(n);
    if (n < 0) throw new RangeErr('Iterator.prototype.drop: the limit is negative');
    var it = this, next = it.next;
    return (function* () {
      for (; n > 0; n--) if (apply(next, it, []).done) return;
      for (;;) {
        var r = apply(next, it, []);
        if (r.done) return;
        yield r.value;
      }
    })();
  };
  return impl;
})"#;

/// Evaluates `script` with `root` bound to `$`; answers its value as JSON (undefined -> null).
pub fn evaluate(script: &str, root: &Value, limits: &Limits) -> Result<Value, ScriptError> {
    let deadline = Instant::now().checked_add(limits.time);
    let root_json = serde_json::to_string(root)
        .map_err(|e| ScriptError::Failed(format!("the payload is not JSON: {e}")))?;
    // The prelude shares the script's first line so that error locations keep their line numbers.
    let source = format!("globalThis.{STARTED} = true, void 0; {script}");

    let runtime = Runtime::new().map_err(|_| ScriptError::OutOfMemory)?;
    runtime.set_memory_limit(limits.memory_bytes);
    runtime.set_max_stack_size(limits.stack_bytes);
    let interrupted = Arc::new(AtomicBool::new(false));
    if let Some(deadline) = deadline {
        let interrupted = interrupted.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || {
            let late = Instant::now() >= deadline;
            if late {
                interrupted.store(true, Ordering::Relaxed);
            }
            late
        })));
    }
    let context = Context::full(&runtime).map_err(|_| ScriptError::OutOfMemory)?;

    let outcome = context.with(|ctx| run(&ctx, &source, &root_json, limits));
    if interrupted.load(Ordering::Relaxed) && outcome.is_err() {
        return Err(ScriptError::TimedOut(limits.time));
    }
    outcome.map_err(|fault| match fault {
        Fault::Script(e) => e,
        Fault::NullThrown => {
            // Read outside `with`: the runtime is locked while a context is in use.
            let used = usize::try_from(runtime.memory_usage().malloc_size).unwrap_or(usize::MAX);
            if limits.memory_bytes > 0
                && used.saturating_add(MEMORY_SLACK_BYTES) >= limits.memory_bytes
            {
                ScriptError::OutOfMemory
            } else {
                ScriptError::Failed("null".to_owned())
            }
        }
    })
}

/// JavaScript truthiness of a JSON value (false, 0, "", null are false; everything else true,
/// including empty arrays and objects).
pub fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        // serde_json has no NaN, JavaScript's other falsy number.
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// How a run inside the context failed, before the checks that need the runtime.
enum Fault {
    Script(ScriptError),
    /// The exception was `null`: QuickJS out of memory, or the script threw `null`.
    NullThrown,
}

/// Where a failure happened, which decides what a plain exception means.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Hardening the built-ins and binding the payload to `$`.
    Bind,
    /// Parsing or running the script.
    Run,
    /// Turning the script's value into JSON.
    Convert,
}

/// Hardens the built-ins, binds `$`, runs `source` and converts its value; inside the context.
fn run(ctx: &Ctx<'_>, source: &str, root_json: &str, limits: &Limits) -> Result<Value, Fault> {
    let memory_bytes = match limits.memory_bytes {
        0 => usize::MAX,
        n => n,
    };
    let array_length_max = (memory_bytes / ELEMENT_BYTES_MIN).min(u32::MAX as usize) as f64;
    let mut options = EvalOptions::default();
    options.filename = Some("sandbox".to_owned());
    ctx.eval_with_options::<rquickjs::Function, _>(HARDENING, options)
        .and_then(|harden| harden.call::<_, ()>((array_length_max, GUARDED)))
        .map_err(|e| fault(ctx, e, Phase::Bind))?;
    let root = ctx
        .json_parse(root_json)
        .map_err(|e| fault(ctx, e, Phase::Bind))?;
    ctx.globals()
        .set("$", root)
        .map_err(|e| fault(ctx, e, Phase::Bind))?;

    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.backtrace_barrier = true;
    options.filename = Some("script".to_owned());
    let value: rquickjs::Value = match ctx.eval_with_options(source, options) {
        Ok(value) => value,
        Err(rquickjs::Error::InvalidString(_)) => {
            return Err(Fault::Script(ScriptError::Syntax(
                "the script contains a NUL character".to_owned(),
            )))
        }
        Err(e) => return Err(fault(ctx, e, Phase::Run)),
    };

    if value.is_undefined() {
        return Ok(Value::Null);
    }
    if value.is_function() {
        return Err(Fault::Script(ScriptError::NotJson(
            "it is a function".to_owned(),
        )));
    }
    if value.is_symbol() {
        return Err(Fault::Script(ScriptError::NotJson(
            "it is a symbol".to_owned(),
        )));
    }
    let json = match ctx.json_stringify(value) {
        Ok(Some(json)) => json,
        Ok(None) => {
            return Err(Fault::Script(ScriptError::NotJson(
                "JSON.stringify gives undefined for it".to_owned(),
            )))
        }
        Err(e) => return Err(fault(ctx, e, Phase::Convert)),
    };
    let json = json
        .to_string()
        .map_err(|e| fault(ctx, e, Phase::Convert))?;
    if json.len() > limits.output_bytes {
        return Err(Fault::Script(ScriptError::OutputTooLarge {
            limit: limits.output_bytes,
        }));
    }
    serde_json::from_str(&json).map_err(|e| Fault::Script(ScriptError::NotJson(e.to_string())))
}

/// Classifies an error from QuickJS, taking the pending exception if there is one.
fn fault(ctx: &Ctx<'_>, error: rquickjs::Error, phase: Phase) -> Fault {
    let failed = |message: String| {
        Fault::Script(match phase {
            Phase::Bind | Phase::Run => ScriptError::Failed(message),
            Phase::Convert => ScriptError::NotJson(message),
        })
    };
    match error {
        rquickjs::Error::Exception => {}
        rquickjs::Error::Allocation => return Fault::Script(ScriptError::OutOfMemory),
        other => return failed(clip(other.to_string())),
    }
    let thrown = ctx.catch();
    if thrown.is_null() {
        return Fault::NullThrown;
    }
    let (name, message) = describe(ctx, &thrown);
    let exhausted = matches!(
        (name.as_deref(), message.as_str()),
        (Some("InternalError"), "out of memory" | "stack overflow")
            | (Some("RangeError"), "Maximum call stack size exceeded")
    );
    if exhausted {
        return Fault::Script(ScriptError::OutOfMemory);
    }
    if phase == Phase::Run && !started(ctx) {
        // QuickJS says `''` for the end of the input.
        let message = match message.strip_suffix("''") {
            Some(head) => format!("{head}end of script"),
            None => message,
        };
        return Fault::Script(ScriptError::Syntax(clip(with_location(message, &thrown))));
    }
    let text = match name {
        Some(name) => format!("{name}: {message}"),
        None => message,
    };
    failed(clip(match phase {
        Phase::Run => with_location(text, &thrown),
        Phase::Bind | Phase::Convert => text,
    }))
}

/// Whether the script parsed and began to run (the prelude set [`STARTED`]). Called after `catch`,
/// with no exception pending; only a script that ran can make the read fail, and a script that
/// tampers with the flag only confuses its own diagnosis.
fn started(ctx: &Ctx<'_>) -> bool {
    !matches!(
        ctx.globals().get::<_, Option<bool>>(STARTED),
        Ok(None | Some(false))
    )
}

/// An exception's name (for `Error` objects) and message, for people.
fn describe<'js>(ctx: &Ctx<'js>, thrown: &rquickjs::Value<'js>) -> (Option<String>, String) {
    if let Some(object) = thrown.as_object() {
        if object.is_error() {
            let name = object.get::<_, Coerced<String>>("name").ok().map(|n| n.0);
            let message = object
                .get::<_, Coerced<String>>("message")
                .map(|m| m.0)
                .unwrap_or_default();
            return (name, message);
        }
    }
    if let Some(s) = thrown.as_string() {
        return (None, s.to_string().unwrap_or_default());
    }
    let json = ctx
        .json_stringify(thrown.clone())
        .ok()
        .flatten()
        .and_then(|s| s.to_string().ok());
    (None, json.unwrap_or_else(|| thrown.type_name().to_owned()))
}

/// Appends where in the script an exception arose: the first `script:LINE:COLUMN` of its stack.
fn with_location(text: String, thrown: &rquickjs::Value<'_>) -> String {
    let stack = thrown
        .as_object()
        .and_then(|o| o.get::<_, Coerced<String>>("stack").ok())
        .map(|s| s.0)
        .unwrap_or_default();
    let location = stack
        .lines()
        .find_map(|line| {
            let line = line.trim();
            let at = line.strip_prefix("at script:");
            at.or_else(|| Some(line.split_once("(script:")?.1))
        })
        .and_then(|at| {
            let (line, column) = at.split_once(':')?;
            let line: usize = line.parse().ok()?;
            let column: usize = column.trim_end_matches(')').parse().ok()?;
            Some((line, column))
        });
    match location {
        Some((line, column)) => {
            // The prelude shifts the first line's columns.
            let column = if line == 1 {
                column.saturating_sub(prelude_len()).max(1)
            } else {
                column
            };
            format!("{text} (at script line {line}, column {column})")
        }
        None => text,
    }
}

/// Length of the prelude that [`evaluate`] puts before the script.
fn prelude_len() -> usize {
    format!("globalThis.{STARTED} = true, void 0; ").len()
}

/// Cuts a message to [`MESSAGE_BYTES_MAX`] at a character boundary.
fn clip(mut message: String) -> String {
    if message.len() > MESSAGE_BYTES_MAX {
        let mut end = MESSAGE_BYTES_MAX;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("...");
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(script: &str, root: &Value) -> Result<Value, ScriptError> {
        evaluate(script, root, &Limits::default())
    }

    fn limits(time_ms: u64, memory_bytes: usize) -> Limits {
        Limits {
            time: Duration::from_millis(time_ms),
            memory_bytes,
            ..Limits::default()
        }
    }

    #[test]
    fn condition_true_and_false() {
        let cond = "$.status == 'READY'";
        assert_eq!(eval(cond, &json!({"status": "READY"})), Ok(json!(true)));
        assert_eq!(eval(cond, &json!({"status": "WAITING"})), Ok(json!(false)));
        assert_eq!(eval(cond, &json!({})), Ok(json!(false)));
    }

    #[test]
    fn nested_paths_and_arrays() {
        let root = json!({"order": {"items": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 5}]}});
        assert_eq!(eval("$.order.items[1].sku", &root), Ok(json!("b")));
        assert_eq!(eval("$.order.items.length > 1", &root), Ok(json!(true)));
        assert_eq!(
            eval(
                "$.order.items.map(i => i.qty).reduce((a, b) => a + b, 0)",
                &root
            ),
            Ok(json!(7))
        );
        assert_eq!(
            eval("$['order']['items']", &root),
            Ok(root["order"]["items"].clone())
        );
    }

    #[test]
    fn arrays_answer_java_list_get_and_size() {
        let root = json!({"list": [4, 5, 6]});
        assert_eq!(eval("$.list.get(1) + $.list.size()", &root), Ok(json!(8)));
        let keys = "Object.keys($.list).length";
        assert_eq!(eval(keys, &root), Ok(json!(3)), "not enumerable");
    }

    #[test]
    fn function_invocation_returns_an_object() {
        let script = "(function () { var n = $.n * 2; return { doubled: n, tags: ['x', $.name], ok: true }; })()";
        assert_eq!(
            eval(script, &json!({"n": 21, "name": "w"})),
            Ok(json!({"doubled": 42, "tags": ["x", "w"], "ok": true}))
        );
    }

    #[test]
    fn completion_value_of_statements() {
        assert_eq!(
            eval("var x = $.a + 1; x * 10", &json!({"a": 1})),
            Ok(json!(20))
        );
        assert_eq!(
            eval("if ($.a) { 'yes' } else { 'no' }", &json!({"a": 0})),
            Ok(json!("no"))
        );
    }

    #[test]
    fn undefined_is_null() {
        assert_eq!(eval("undefined", &json!({})), Ok(Value::Null));
        assert_eq!(eval("$.missing", &json!({})), Ok(Value::Null));
        assert_eq!(eval("", &json!({})), Ok(Value::Null));
        assert_eq!(eval("var x = 1;", &json!({})), Ok(Value::Null));
    }

    #[test]
    fn scalars_and_payload_round_trip() {
        let root =
            json!({"s": "é\u{0}\"", "n": -1.5, "big": 9007199254740991_u64, "b": false, "z": null});
        assert_eq!(eval("$", &root), Ok(root.clone()));
        assert_eq!(eval("NaN", &root), Ok(Value::Null));
        assert_eq!(
            eval("new Date(0)", &root),
            Ok(json!("1970-01-01T00:00:00.000Z"))
        );
    }

    #[test]
    fn syntax_error() {
        let err = eval("$.status ==", &json!({})).expect_err("the script fails");
        let ScriptError::Syntax(message) = &err else {
            panic!("expected Syntax, got {err:?}");
        };
        assert!(message.contains("end of script"), "{message}");
        assert!(message.contains("line 1, column 12"), "{message}");
        assert!(
            matches!(eval("1;\n  )", &json!({})), Err(ScriptError::Syntax(m)) if m.contains("line 2"))
        );
        assert!(matches!(
            eval("a\0b", &json!({})),
            Err(ScriptError::Syntax(_))
        ));
    }

    #[test]
    fn syntax_error_thrown_at_run_time_is_a_failure() {
        assert!(matches!(
            eval("JSON.parse('{')", &json!({})),
            Err(ScriptError::Failed(m)) if m.starts_with("SyntaxError")
        ));
        assert!(matches!(
            eval("eval('(')", &json!({})),
            Err(ScriptError::Failed(m)) if m.starts_with("SyntaxError")
        ));
    }

    #[test]
    fn thrown_error_keeps_its_message() {
        let err = eval("throw new Error('boom: ' + $.id)", &json!({"id": 7}))
            .expect_err("the script fails");
        assert!(
            matches!(&err, ScriptError::Failed(m) if m.contains("boom: 7")),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("script failed: Error: boom: 7 (at script line 1, column "),
            "{err}"
        );
        assert_eq!(
            eval("throw 'plain'", &json!({})),
            Err(ScriptError::Failed("plain".into()))
        );
        assert_eq!(
            eval("throw {code: 3}", &json!({})),
            Err(ScriptError::Failed(r#"{"code":3}"#.into()))
        );
        assert_eq!(
            eval("throw null", &json!({})),
            Err(ScriptError::Failed("null".into()))
        );
        assert!(matches!(
            eval("nope.x", &json!({})),
            Err(ScriptError::Failed(m)) if m.contains("nope is not defined")
        ));
        assert!(matches!(
            eval("$.a.b.c", &json!({})),
            Err(ScriptError::Failed(m)) if m.starts_with("TypeError")
        ));
    }

    #[test]
    fn long_messages_are_clipped() {
        let Err(ScriptError::Failed(m)) = eval("throw 'x'.repeat(100000)", &json!({})) else {
            panic!("expected Failed");
        };
        assert!(m.len() <= MESSAGE_BYTES_MAX + 3, "{}", m.len());
    }

    #[test]
    fn infinite_loop_is_stopped() {
        let limit = Duration::from_millis(50);
        let started = Instant::now();
        let result = evaluate("while(true){}", &json!({}), &limits(50, 16 << 20));
        assert_eq!(result, Err(ScriptError::TimedOut(limit)));
        // A safety check, not a timing test.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            ScriptError::TimedOut(limit).to_string(),
            "script ran longer than 50 ms and was stopped"
        );
    }

    #[test]
    fn timeout_cannot_be_caught() {
        let script = "for (;;) { try { while (true) {} } catch (e) {} finally { 'again' } }";
        assert_eq!(
            evaluate(script, &json!({}), &limits(50, 16 << 20)),
            Err(ScriptError::TimedOut(Duration::from_millis(50)))
        );
        let stubborn = "var o = { toJSON() { for (;;) {} } }; o";
        assert_eq!(
            evaluate(stubborn, &json!({}), &limits(50, 16 << 20)),
            Err(ScriptError::TimedOut(Duration::from_millis(50)))
        );
    }

    /// Runs `script` on its own thread and waits at most 5 s for it: a regression here would
    /// otherwise hang the test run instead of failing it.
    fn eval_bounded(script: &str, limits: Limits) -> Result<Value, ScriptError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let owned = script.to_owned();
        std::thread::spawn(move || {
            let _ = tx.send(evaluate(&owned, &json!({}), &limits));
        });
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("still running after 5 s: {script}"))
    }

    #[test]
    fn native_loops_over_huge_lengths_are_refused_or_stopped() {
        let fake = "({length: 2**53 - 1})";
        let methods = [
            "join.call(F, '')",
            "toLocaleString.call(F)",
            "reverse.call(F)",
            "copyWithin.call(F, 0, 1)",
            "sort.call(F)",
            "splice.call(F, 0, 1)",
            "shift.call(F)",
            "unshift.call({length: 2**53 - 2}, 1)",
            "flat.call(F)",
            "flatMap.call(F, x => x)",
            "concat.call([], {length: 2**32 - 1, [Symbol.isConcatSpreadable]: true})",
            "keys.call(F).drop(1e15).next()",
        ];
        let mut scripts: Vec<String> = methods
            .iter()
            .map(|m| format!("Array.prototype.{}", m.replace('F', fake)))
            .collect();
        scripts.extend(
            [
                "String(Array(2**32 - 1))",
                "[Array(2**32 - 1)].flat()",
                "JSON.stringify({}, Array(2**32 - 1))",
                // A length that would change between the guard's read and the loop's.
                "var o = { n: 0, get length() { return this.n++ ? 2**53 - 1 : 0; } };
                 Array.prototype.join.call(o, '')",
                "var o = { length: { valueOf() { o.length = 2**53 - 1; return 0; } } };
                 Array.prototype.join.call(o, '')",
                "typeof Proxy == 'undefined' || Array.prototype.join.call(new Proxy({length: 2**53 - 1},
                 { getOwnPropertyDescriptor() { return { value: 0, writable: true, configurable: true }; } }), '')",
            ]
            .map(str::to_owned),
        );
        for script in &scripts {
            let result = eval_bounded(script, limits(50, 16 << 20));
            assert!(
                result.is_err() || result == Ok(json!(true)),
                "{script}: {result:?}"
            );
        }
        let Err(ScriptError::Failed(message)) = eval("Array(2**32 - 1).join('')", &json!({}))
        else {
            panic!("expected Failed");
        };
        assert!(
            message.contains("over the script sandbox limit")
                && message.contains("at script line 1"),
            "{message}"
        );
    }

    #[test]
    fn hardened_builtins_keep_their_behaviour() {
        let cases = [
            ("[3, 1, 2].sort().join('-')", json!("1-2-3")),
            (
                "[1, 2, 3].reverse().concat([4], 5, [[6]])",
                json!([3, 2, 1, 4, 5, [6]]),
            ),
            ("[1, [2, [3, [4]]]].flat(Infinity)", json!([1, 2, 3, 4])),
            ("[1, [2, [3]]].flat()", json!([1, 2, [3]])),
            (
                "[[1, 2], [3]].flatMap(x => x.concat(0))",
                json!([1, 2, 0, 3, 0]),
            ),
            ("[...[1, 2, 3, 4].values().drop(2)]", json!([3, 4])),
            (
                "var a = [1, 2, 3]; a.splice(1, 1); a.unshift(0); a.shift(); a",
                json!([1, 3]),
            ),
            ("[1, 2, 3, 4, 5].copyWithin(0, 3)", json!([4, 5, 3, 4, 5])),
            ("JSON.stringify({ a: 1, b: 2 }, ['a'])", json!("{\"a\":1}")),
            ("Array.prototype.join.call('abc', '+')", json!("a+b+c")),
            (
                "Array.prototype.join.call(new Uint8Array([1, 2]))",
                json!("1,2"),
            ),
            ("var a = []; a[1000] = 1; a.join('').length", json!(1)),
            (
                "[].concat.length + [].join.length + [].flatMap.length",
                json!(3),
            ),
            ("[].join.name", json!("join")),
            ("Object.keys(Array.prototype).length", json!(0)),
        ];
        for (script, expected) in cases {
            assert_eq!(eval(script, &json!({})), Ok(expected), "{script}");
        }
    }

    #[test]
    fn memory_bomb_is_stopped() {
        // A generous time limit, so that the memory limit is what stops it.
        let bombs = [
            "var a = []; while (true) a.push('x'.repeat(1024) + a.length);",
            "var s = 'x'; while (true) s = s.repeat(2);",
            "var a = []; for (;;) a.push({ n: a.length });",
        ];
        for bomb in bombs {
            assert_eq!(
                evaluate(bomb, &json!({}), &limits(10_000, 4 << 20)),
                Err(ScriptError::OutOfMemory),
                "{bomb}"
            );
        }
    }

    #[test]
    fn payload_over_the_memory_limit_is_out_of_memory() {
        let root = json!({"blob": "x".repeat(8 << 20)});
        assert_eq!(
            evaluate("1", &root, &limits(1_000, 4 << 20)),
            Err(ScriptError::OutOfMemory)
        );
    }

    #[test]
    fn deep_recursion_is_an_error() {
        assert_eq!(
            eval("function f(n) { return f(n + 1) + 1; } f(0)", &json!({})),
            Err(ScriptError::OutOfMemory)
        );
        // A script may catch it and go on.
        assert_eq!(
            eval(
                "function f() { return f(); } try { f() } catch (e) { 'caught' }",
                &json!({})
            ),
            Ok(json!("caught"))
        );
    }

    #[test]
    fn output_over_the_limit() {
        let small = Limits {
            output_bytes: 100,
            ..Limits::default()
        };
        assert_eq!(
            evaluate("'x'.repeat(1000)", &json!({}), &small),
            Err(ScriptError::OutputTooLarge { limit: 100 })
        );
        assert_eq!(
            evaluate("'x'.repeat(10)", &json!({}), &small),
            Ok(json!("xxxxxxxxxx"))
        );
    }

    #[test]
    fn not_json_results() {
        for script in [
            "(function () {})",
            "() => 1",
            "Symbol('s')",
            "10n",
            "var o = {}; o.o = o; o",
        ] {
            assert!(
                matches!(eval(script, &json!({})), Err(ScriptError::NotJson(_))),
                "{script}"
            );
        }
        // Inside a value, JSON.stringify's own rules apply: functions are dropped.
        assert_eq!(
            eval("({ a: 1, f: function () {} })", &json!({})),
            Ok(json!({"a": 1}))
        );
    }

    #[test]
    fn scripts_do_not_share_state() {
        assert_eq!(eval("globalThis.leak = 1; leak", &json!({})), Ok(json!(1)));
        assert_eq!(eval("typeof leak", &json!({})), Ok(json!("undefined")));
        assert_eq!(
            eval("Array.prototype.x = 5; [].x", &json!({})),
            Ok(json!(5))
        );
        assert_eq!(eval("[].x", &json!({})), Ok(Value::Null));
    }

    #[test]
    fn hostile_scripts_leave_the_thread_healthy() {
        let tight = limits(50, 4 << 20);
        let root = json!({"status": "READY"});
        assert!(evaluate("while(true){}", &root, &tight).is_err());
        assert!(evaluate(
            "var a = []; for (;;) a.push('x'.repeat(1024));",
            &root,
            &tight
        )
        .is_err());
        assert!(evaluate("function f() { return f() + 1; } f()", &root, &tight).is_err());
        assert!(evaluate("'x'.repeat(1 << 20)", &root, &tight).is_err());
        assert_eq!(
            evaluate("$.status == 'READY'", &root, &Limits::default()),
            Ok(json!(true))
        );
    }

    #[test]
    fn truthiness() {
        for falsy in [
            json!(null),
            json!(false),
            json!(0),
            json!(-0.0),
            json!(0.0),
            json!(""),
        ] {
            assert!(!is_truthy(&falsy), "{falsy}");
        }
        for truthy in [
            json!(true),
            json!(1),
            json!(-1),
            json!(0.5),
            json!("0"),
            json!("false"),
            json!([]),
            json!({}),
        ] {
            assert!(is_truthy(&truthy), "{truthy}");
        }
    }
}
