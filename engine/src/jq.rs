//! jq, through the jaq crates: JSON_JQ_TRANSFORM's `queryExpression` is checked here when a
//! definition is registered ([`compile`]), and run by the node's script hosts ([`run`]), never
//! by the decider itself: a query can take unbounded time (`[range(1e12)]`), and only a child
//! process can be stopped from outside.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{data, unwrap_valr, Compiler, Ctx, Vars};
use jaq_json::Val;
use serde_json::Value;

/// A compiled jq query.
pub type Filter = jaq_core::compile::Filter<jaq_core::Native<data::JustLut<Val>>>;

/// Parses and compiles `query` with jq's standard library; the error says where it fails.
pub fn compile(query: &str) -> Result<Filter, String> {
    compile_with_vars(query, &[])
}

/// [`compile`], with the global variables `vars` (named with their `$`) declared: a query that
/// uses any other variable it does not bind itself does not compile. Running such a filter needs
/// a value for each of them, in that order.
pub fn compile_with_vars(query: &str, vars: &[&str]) -> Result<Filter, String> {
    compile_from(query, vars, &[])
}

/// The functions that read the clock, the environment or the process's input, or log from it
/// (`halt` stays: it ends the query with an error): a decision may not depend on them (a Serverless Workflow expression runs in the
/// decider; a JSON_JQ_TRANSFORM runs in a script host and may use them).
pub const IMPURE_FUNCTIONS: [&str; 8] = [
    "now",
    "env",
    "input",
    "inputs",
    "debug",
    "stderr",
    "localtime",
    "strflocaltime",
];

/// [`compile_with_vars`] without the [`IMPURE_FUNCTIONS`]: the same query gives the same
/// answer wherever and whenever it runs.
pub fn compile_pure(query: &str, vars: &[&str]) -> Result<Filter, String> {
    compile_from(query, vars, &IMPURE_FUNCTIONS)
}

fn compile_from(query: &str, vars: &[&str], without: &[&str]) -> Result<Filter, String> {
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|f| !without.contains(&f.0));
    let arena = Arena::default();
    let program = File {
        code: query,
        path: (),
    };
    let modules = Loader::new(defs)
        .load(&arena, program)
        .map_err(|errors| parse_error(query, errors))?;
    Compiler::default()
        .with_funs(funs)
        .with_global_vars(vars.iter().copied())
        .compile(modules)
        .map_err(|errors| {
            let undefined: Vec<String> = errors
                .into_iter()
                .flat_map(|(_, errs)| errs)
                .map(|(name, kind)| format!("{} {name}", kind.as_str()))
                .collect();
            format!("jq query uses undefined {}", undefined.join(", "))
        })
}

/// Where and why `query` does not parse: what was expected at which byte offset.
fn parse_error(query: &str, errors: jaq_core::load::Errors<&str, ()>) -> String {
    use jaq_core::load::Error;
    let at = |rest: &str| query.len().saturating_sub(rest.len());
    let found: Vec<String> = errors
        .into_iter()
        .flat_map(|(_, e)| match e {
            Error::Io(errs) => errs.into_iter().map(|(_, m)| m).collect::<Vec<_>>(),
            Error::Lex(errs) => errs
                .into_iter()
                .map(|(expect, rest)| {
                    format!("expected {} at offset {}", expect.as_str(), at(rest))
                })
                .collect(),
            Error::Parse(errs) => errs
                .into_iter()
                .map(|(expect, rest)| {
                    format!("expected {} at offset {}", expect.as_str(), at(rest))
                })
                .collect(),
        })
        .collect();
    format!("jq query does not parse: {}", found.join("; "))
}

/// Runs `filter` on `input`: every output, or the first error.
pub fn run(filter: &Filter, input: &Value) -> Result<Vec<Value>, String> {
    run_with(filter, input, &[])
}

/// [`run`] with the values of the global variables the filter was compiled with, in order.
pub fn run_with(filter: &Filter, input: &Value, vars: &[&Value]) -> Result<Vec<Value>, String> {
    let input = to_val(input)?;
    let vars = vars
        .iter()
        .map(|v| to_val(v))
        .collect::<Result<Vec<_>, _>>()?;
    let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new(vars));
    filter
        .id
        .run((ctx, input))
        .map(unwrap_valr)
        .map(|out| {
            let val = out.map_err(|e| format!("jq: {e}"))?;
            serde_json::from_str(&val.to_string()).map_err(|e| format!("jq output: {e}"))
        })
        .collect()
}

fn to_val(value: &Value) -> Result<Val, String> {
    let text = serde_json::to_vec(value).map_err(|e| e.to_string())?;
    jaq_json::read::parse_single(&text).map_err(|e| format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(query: &str, input: Value) -> Result<Vec<Value>, String> {
        run(&compile(query)?, &input)
    }

    #[test]
    fn runs_queries_with_the_standard_library() {
        let input = json!({"a": [1, 2, 3], "s": "x"});
        assert_eq!(
            eval(".a | map(. * 2)", input.clone()),
            Ok(vec![json!([2, 4, 6])])
        );
        assert_eq!(
            eval(".a[]", input.clone()),
            Ok(vec![json!(1), json!(2), json!(3)])
        );
        assert_eq!(
            eval("{k: .s, n: (.a | length)}", input.clone()),
            Ok(vec![json!({"k": "x", "n": 3})])
        );
        assert_eq!(eval("empty", input), Ok(vec![]));
    }

    #[test]
    fn reports_parse_and_run_errors() {
        let parse = compile(".a | ").err().unwrap_or_default();
        assert!(parse.contains("does not parse"), "{parse}");
        let undefined = compile("nosuchfunction(1)").err().unwrap_or_default();
        assert_eq!(undefined, "jq query uses undefined filter nosuchfunction");
        let at = compile(".a | {").err().unwrap_or_default();
        assert!(at.ends_with("expected closing brace at offset 6"), "{at}");
        let err = eval(".a + 1", json!({"a": "text"})).expect_err("a string plus a number");
        assert!(err.starts_with("jq: "), "{err}");
    }

    #[test]
    fn pure_queries_see_their_variables_and_no_clock() {
        let filter = compile_pure("[$a, .x, $b]", &["$a", "$b"]).expect("compiles");
        let out = run_with(&filter, &json!({"x": 2}), &[&json!(1), &json!("b")]);
        assert_eq!(out, Ok(vec![json!([1, 2, "b"])]));
        assert!(compile_pure("now", &[]).is_err());
        assert!(compile_pure("env", &[]).is_err());
        assert!(compile("now").is_ok());
    }
}
