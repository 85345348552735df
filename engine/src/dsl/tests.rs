//! The DSL's own examples and invalid documents (engine/tests/data/serverless-workflow), and one
//! case for each rule.

use super::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn data(folder: &str) -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/serverless-workflow")
        .join(folder);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("the test data folder")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable file");
            (path.display().to_string(), text)
        })
        .collect();
    files.sort();
    files
}

fn pointers(error: &Error) -> Vec<String> {
    error.problems().into_iter().map(|p| p.pointer).collect()
}

/// The problems of a document with the given tasks (YAML, indented as under `do:`).
fn refused(uses: &str, tasks: &str) -> Error {
    let text = format!(
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: t\n  version: '0.1.0'\n{uses}do:\n{tasks}"
    );
    load(&text).expect_err("the document is refused")
}

#[test]
fn every_example_of_the_specification_is_valid() {
    let examples = data("examples");
    assert_eq!(examples.len(), 66);
    let failures: Vec<String> = examples
        .iter()
        .filter_map(|(path, text)| load(text).err().map(|e| format!("{path}: {e}")))
        .collect();
    assert_eq!(failures, Vec::<String>::new());
    let doc = load(&examples[0].1).expect("valid");
    assert_eq!(doc.header().dsl, "1.0.3");
    assert_eq!(doc.json()["document"]["name"], doc.header().name.as_str());
}

#[test]
fn the_invalid_documents_are_refused_where_they_are_wrong() {
    let invalid: BTreeMap<String, String> = data("invalid")
        .into_iter()
        .map(|(path, text)| (path.rsplit('/').next().unwrap_or("").to_owned(), text))
        .collect();
    assert_eq!(invalid.len(), 3);
    let err = load(&invalid["extra-property-in-call.yaml"]).expect_err("refused");
    assert!(matches!(err, Error::Schema(_)), "{err}");
    assert_eq!(pointers(&err), ["/do/0/getPet"]);
    assert!(err.to_string().contains("'foo'"), "{err}");

    let err = load(&invalid["two-tasks-in-one-item.yaml"]).expect_err("refused");
    assert!(matches!(err, Error::Schema(_)), "{err}");
    assert_eq!(pointers(&err), ["/do/0"]);

    // It says `do:` twice, which YAML refuses, before its nested `until` breaks the schema.
    let text = &invalid["listen-any-until-any-until.yaml"];
    let err = load(text).expect_err("refused");
    let Error::Syntax { location, message } = &err else {
        panic!("a duplicate key: {err}");
    };
    assert_eq!(location.map(|l| l.line), Some(1));
    assert_eq!(message, "this mapping has the key `do` twice");
    let once = text.replacen("do:\ndo:\n", "do:\n", 1);
    let err = load(&once).expect_err("refused");
    assert!(matches!(err, Error::Schema(_)), "{err}");
    assert_eq!(pointers(&err), ["/do/0/callDoctor/listen/to/until/until"]);
}

#[test]
fn a_then_may_not_leave_its_list() {
    let tasks = "  - outer:
      do:
        - inner:
            set: {a: 1}
            then: last
  - last:
      set: {b: 2}
      then: nowhere
";
    let err = refused("", tasks);
    assert!(matches!(err, Error::Rules(_)), "{err}");
    assert_eq!(
        pointers(&err),
        ["/do/0/outer/do/0/inner/then", "/do/1/last/then"]
    );
    assert!(err.to_string().contains("a task of another list"), "{err}");
}

#[test]
fn task_names_are_unique_in_a_list() {
    let tasks = "  - a:
      set: {x: 1}
  - b:
      do:
        - a:
            set: {x: 2}
  - a:
      set: {x: 3}
";
    assert_eq!(pointers(&refused("", tasks)), ["/do/2/a"]);
}

#[test]
fn a_switch_has_at_most_one_default_case() {
    let tasks = "  - pick:
      switch:
        - big:
            when: .n > 10
            then: done
        - other:
            then: done
        - fallback:
            then: exit
  - done:
      set: {x: 1}
";
    let err = refused("", tasks);
    assert_eq!(pointers(&err), ["/do/0/pick/switch/2/fallback"]);
    assert!(err.to_string().contains("a second default case"), "{err}");
}

#[test]
fn calls_errors_retries_and_timeouts_must_be_declared() {
    let uses = "use:
  functions:
    greet:
      call: http
      with: {method: get, endpoint: 'https://example.test'}
  retries:
    again: {delay: {seconds: 1}}
";
    let tasks = "  - ok:
      call: greet
  - unknown:
      call: greeting
  - fail:
      raise:
        error: notDeclared
  - guarded:
      try:
        - step:
            call: http
            with: {method: get, endpoint: 'https://example.test'}
      catch:
        retry: twice
  - slow:
      wait: PT1S
      timeout: short
";
    let err = refused(uses, tasks);
    assert_eq!(
        pointers(&err),
        [
            "/do/1/unknown/call",
            "/do/2/fail/raise/error",
            "/do/3/guarded/catch/retry",
            "/do/4/slow/timeout"
        ]
    );
}

#[test]
fn expressions_must_compile_with_the_variables_in_scope() {
    let tasks = "  - loop:
      for:
        each: pet
        in: .pets
      while: $pet != null
      do:
        - keep:
            set:
              id: ${ $pet.id }
              broken: ${ .a | }
  - after:
      if: $pet.id > 0
      set:
        n: ${ $context.count + 1 }
      output:
        as: nosuchfunction(1)
";
    let err = refused("", tasks);
    assert_eq!(
        pointers(&err),
        [
            "/do/0/loop/do/0/keep/set/broken",
            "/do/1/after/if",
            "/do/1/after/output/as"
        ]
    );
}

#[test]
fn durations_may_not_be_negative() {
    let tasks = "  - pause:
      wait:
        seconds: -5
  - later:
      wait: -PT5S
";
    let err = refused("", tasks);
    assert!(
        matches!(err, Error::Schema(_)),
        "an ISO duration has no sign: {err}"
    );
    assert_eq!(pointers(&err), ["/do/1/later/wait"]);
    let err = refused("", "  - pause:\n      wait:\n        seconds: -5\n");
    assert!(matches!(err, Error::Rules(_)), "{err}");
    assert_eq!(pointers(&err), ["/do/0/pause/wait"]);
}

#[test]
fn refusals_render_as_problem_details() {
    let err = refused("", "  - a:\n      call: nothing\n");
    let details = err.problem_details();
    assert_eq!(details.kind, VALIDATION_TYPE);
    assert_eq!(details.status, 400);
    assert_eq!(details.instance.as_deref(), Some("/do/0/a/call"));
    assert_eq!(details.errors.len(), 1);
    let json = serde_json::to_value(&details).expect("serialisable");
    assert_eq!(json["type"], VALIDATION_TYPE);
    assert_eq!(json["errors"][0]["pointer"], "/do/0/a/call");

    let other = "document:\n  dsl: '0.8'\n  namespace: t\n  name: t\n  version: '1.0.0'\ndo: []\n";
    let details = load(other).expect_err("refused").problem_details();
    assert_eq!(details.kind, CONFIGURATION_TYPE);
    assert_eq!(details.instance.as_deref(), Some("/document/dsl"));
    assert!(details.detail.contains("0.8"), "{}", details.detail);
}

#[test]
fn catch_and_foreach_bind_their_variables_inside_only() {
    let tasks = "  - guarded:
      try:
        - step:
            call: http
            with: {method: get, endpoint: 'https://example.test'}
      catch:
        as: failure
        when: ${ $failure.status == 503 }
        do:
          - note:
              set:
                status: ${ $failure.status }
  - collect:
      listen:
        to:
          any:
            - with: {type: com.example.reading}
          until: ( . | length ) > $limit
      foreach:
        item: reading
        do:
          - keep:
              set:
                value: ${ $reading.data }
                outside: ${ $failure }
";
    let err = refused("", tasks);
    assert_eq!(
        pointers(&err),
        [
            "/do/1/collect/foreach/do/0/keep/set/outside",
            "/do/1/collect/listen/to/until"
        ]
    );
    assert!(err.to_string().contains("undefined variable"), "{err}");
}
