//! A task definition's `inputTemplate`: its keys fill what the task's own `inputParameters`
//! leave out, the task's win, and templates in it are resolved like the task's own.

use super::*;

fn templated(template: Value, params: Value) -> WorkflowTask {
    let mut t = simple("a");
    t.input_parameters = obj(params);
    if let Some(def) = t.task_definition.as_mut() {
        def.input_template = obj(template);
    }
    t
}

#[test]
fn the_template_fills_what_the_task_leaves_out_and_the_task_wins() {
    let t = templated(
        json!({"region": "eu", "retries": 3, "who": "${workflow.input.user}", "nested": {"a": 1}}),
        json!({"region": "us", "extra": "${workflow.input.user}"}),
    );
    let h = H::start(def_of(vec![t]), json!({"user": "ann"}));
    assert_eq!(
        Value::Object(h.task("a").input_data.clone()),
        json!({"region": "us", "retries": 3, "who": "ann", "nested": {"a": 1}, "extra": "ann"})
    );
}

#[test]
fn without_a_template_the_input_is_the_tasks_own() {
    let t = templated(json!({}), json!({"x": "${workflow.input.user}"}));
    let h = H::start(def_of(vec![t]), json!({"user": "bo"}));
    assert_eq!(
        Value::Object(h.task("a").input_data.clone()),
        json!({"x": "bo"})
    );
}

#[test]
fn a_retry_keeps_the_input_its_first_attempt_resolved() {
    let mut t = templated(json!({"k": "from-template"}), json!({}));
    if let Some(def) = t.task_definition.as_mut() {
        def.retry_count = 1;
        def.retry_delay_seconds = 0;
    }
    let mut h = H::start(def_of(vec![t]), json!({}));
    h.poll("a");
    h.fail("a");
    let attempts = h.attempts("a");
    assert_eq!(attempts.len(), 2, "one retry");
    assert_eq!(attempts[1].input_data["k"], json!("from-template"));
}
