//! The Serverless Workflow document of the workload: a `for` over two items each calling the
//! `sim_work` function, then a `fork` whose one branch `listen`s for a `sim.ping` event
//! correlated to the instance while the other waits a second and `emit`s that event (through
//! Baton's own queue, the event gate and the listening rows), then a `try` of the `sim_flaky`
//! function retried at most three times (`limit.attempt.count` counts retries). Its output
//! names the instance the consumed event carried, which [`crate::invariants`] checks against
//! the instance's own id.

/// The document's namespace, name and version.
pub const KEY: (&str, &str, &str) = ("sim", "sim-dsl", "1.0.0");

/// What a start of the document is called in the workload's list of workflows.
pub const NAME: &str = "sim/sim-dsl";

/// The most runs the `try` gives its function: one, and `limit.attempt.count` retries.
pub const TRY_RUNS_MAX: usize = 4;

/// The pointer of the `try`'s function.
pub const FLAKY_AT: &str = "/do/2/guarded/try/0/flaky";

pub const DOCUMENT: &str = r#"document:
  dsl: '1.0.3'
  namespace: sim
  name: sim-dsl
  version: '1.0.0'
do:
  - each:
      for:
        each: n
        in: ${ [1, 2] }
      do:
        - work:
            call: sim_work
            with:
              n: ${ $n }
  - both:
      export:
        as: '{ heard: .[0][0].id }'
      fork:
        branches:
          - hear:
              listen:
                to:
                  one:
                    with:
                      type: sim.ping
                    correlate:
                      instance:
                        from: .data.id
                        expect: ${ $workflow.id }
          - tell:
              do:
                - pause:
                    wait:
                      seconds: 1
                - ping:
                    emit:
                      event:
                        with:
                          source: https://sim.example.com
                          type: sim.ping
                          data:
                            id: ${ $workflow.id }
  - guarded:
      try:
        - flaky:
            call: sim_flaky
      catch:
        retry:
          delay:
            seconds: 1
          backoff:
            constant: {}
          limit:
            attempt:
              count: 3
  - done:
      set:
        heard: ${ $context.heard }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// The workload's task types.
    struct SimTypes;

    impl engine::Catalog for SimTypes {
        fn task_def(&self, name: &str) -> Option<proto::model::TaskDef> {
            crate::workload::task_defs()
                .into_iter()
                .find(|d| d.name == name)
        }
    }

    #[test]
    fn the_document_is_valid_and_runs_here() {
        let doc = engine::dsl::load_with(DOCUMENT, &SimTypes).unwrap_or_else(|e| panic!("{e}"));
        engine::dsl::check_supported(&doc).unwrap_or_else(|e| panic!("{e}"));
        let header = doc.header();
        assert_eq!(
            (header.namespace.as_str(), header.name.as_str()),
            (KEY.0, KEY.1)
        );
        assert_eq!(engine::dsl::listened_types(&doc), ["sim.ping"]);
        assert!(doc.json().pointer(FLAKY_AT).is_some());
    }
}
