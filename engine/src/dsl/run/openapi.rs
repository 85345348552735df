//! `call: openapi`: two HTTP tasks one after the other. The first fetches the OpenAPI document
//! (Swagger 2.0 or OpenAPI 3); when it arrives, the operation its `operationId` names is found,
//! its request built from the call's `parameters` (path, query and header parameters, a body
//! parameter), and the second task makes that call in the first one's place. The first task's
//! output is then replaced by the request it led to, so the record does not keep the document.

use super::{errors, Outcome, Runner};
use proto::model::dsl::Frame;
use proto::model::task_type;
use proto::TaskId;
use serde_json::{json, Map, Value};

/// The HTTP methods an OpenAPI path item holds operations under.
const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

impl Runner<'_, '_> {
    /// Starts an OpenAPI call: the fetch of its document.
    pub(super) fn start_openapi(
        &mut self,
        at: &str,
        name: &str,
        args: &Value,
    ) -> Result<TaskId, Value> {
        let uri = super::call::endpoint_uri(args.pointer("/document/endpoint"));
        let authorization = self.authentication(at, args)?;
        let mut headers = Map::new();
        headers.insert("Accept".into(), "application/json".into());
        let fetch = json!({"uri": uri, "method": "GET", "headers": headers});
        let call = json!({
            "operationId": args.get("operationId"),
            "parameters": args.get("parameters").cloned().unwrap_or(json!({})),
            "output": args.get("output").cloned().unwrap_or("content".into()),
            "authorization": authorization,
        });
        let input = json!({"http_request": fetch, "openapi": call});
        Ok(self.open_task(at, name, task_type::HTTP, "", &input))
    }

    /// The document of an OpenAPI call arrived (the frame's task completed): the operation's
    /// call starts in its place. `None` when the frame's task is not such a fetch.
    pub(super) fn openapi_operation(&mut self, frame: &mut Frame) -> Option<Outcome> {
        let task = self.task(&frame.task_id)?;
        let call = task.input_data.get("openapi")?.clone();
        let doc_uri = task
            .input_data
            .get("http_request")?
            .get("uri")?
            .as_str()?
            .to_owned();
        let document = task.output_data.get("response")?.get("body")?.clone();
        let id = call
            .get("operationId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = call
            .get("parameters")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut request = match operation(&document, &doc_uri, id, &params) {
            Ok(request) => request,
            Err(detail) => {
                let at = format!("{}/with/operationId", frame.at);
                return Some(Outcome::Fault(errors::runtime_error(&at, &detail)));
            }
        };
        if let Some(authorization) = call.get("authorization").and_then(Value::as_str) {
            request["headers"]["Authorization"] = authorization.into();
        }
        let fetched = frame.task_id.clone();
        if let Some(i) = self.ctx.index_of(&fetched) {
            let kept = Map::from_iter([("operation".to_owned(), request.clone())]);
            self.ctx.wf.tasks[i].output_data = kept;
        }
        let input = json!({"http_request": request, "output": call.get("output")});
        frame.task_id = self.open_task(&frame.at, &frame.name, task_type::HTTP, "", &input);
        Some(Outcome::Pending)
    }
}

/// The request of the operation `id` of `document` (fetched from `doc_uri`) with `params`.
fn operation(
    document: &Value,
    doc_uri: &str,
    id: &str,
    params: &Map<String, Value>,
) -> Result<Value, String> {
    let paths = document.get("paths").and_then(Value::as_object);
    let found = paths.into_iter().flatten().find_map(|(path, item)| {
        METHODS.iter().find_map(|method| {
            let op = item.get(*method)?;
            (op.get("operationId").and_then(Value::as_str) == Some(id))
                .then_some((path, item, *method, op))
        })
    });
    let Some((path, item, method, op)) = found else {
        return Err(format!("the OpenAPI document has no operation '{id}'"));
    };
    let declared = item
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let declared = declared.chain(
        op.get("parameters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten(),
    );
    let mut uri_path = path.clone();
    let (mut query, mut headers, mut body) = (Vec::new(), Map::new(), None);
    for param in declared {
        let name = param
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(value) = params.get(name) else {
            continue;
        };
        let text = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        match param.get("in").and_then(Value::as_str) {
            Some("path") => {
                uri_path = uri_path.replace(&format!("{{{name}}}"), &super::call::encode(&text))
            }
            Some("query") => query.push(format!(
                "{}={}",
                super::call::encode(name),
                super::call::encode(&text)
            )),
            Some("header") => {
                headers.insert(name.to_owned(), text.into());
            }
            Some("body") => body = Some(value.clone()),
            _ => {}
        }
    }
    if op.get("requestBody").is_some() {
        body = params.get("body").cloned().or(body);
    }
    let mut uri = format!("{}{uri_path}", base_url(document, doc_uri));
    if !query.is_empty() {
        uri = format!("{uri}?{}", query.join("&"));
    }
    let mut request =
        json!({"uri": uri, "method": method.to_ascii_uppercase(), "headers": headers});
    if let Some(body) = body {
        request["body"] = body;
    }
    Ok(request)
}

/// Where the document's operations are: Swagger 2.0's scheme, host and basePath, or OpenAPI
/// 3's first server, each relative to the document's own address where it leaves a part out.
fn base_url(document: &Value, doc_uri: &str) -> String {
    let (scheme, rest) = doc_uri.split_once("://").unwrap_or(("https", doc_uri));
    let origin_host = rest.split('/').next().unwrap_or_default();
    let origin = format!("{scheme}://{origin_host}");
    if let Some(server) = document.pointer("/servers/0/url").and_then(Value::as_str) {
        let server = server.trim_end_matches('/');
        return if server.starts_with('/') {
            format!("{origin}{server}")
        } else {
            server.to_owned()
        };
    }
    let schemes = document.get("schemes").and_then(Value::as_array);
    let same = schemes
        .into_iter()
        .flatten()
        .any(|s| s.as_str() == Some(scheme));
    let first = schemes.and_then(|s| s.first()).and_then(Value::as_str);
    let scheme = if same {
        scheme
    } else {
        first.unwrap_or(scheme)
    };
    let host = document
        .get("host")
        .and_then(Value::as_str)
        .unwrap_or(origin_host);
    let base = document
        .get("basePath")
        .and_then(Value::as_str)
        .unwrap_or("");
    format!("{scheme}://{host}{}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_becomes_its_request() {
        let swagger = json!({"swagger": "2.0", "host": "pets.test", "basePath": "/v2", "schemes": ["https", "http"],
            "paths": {"/pet/{petId}": {"get": {"operationId": "getPetById",
                "parameters": [{"name": "petId", "in": "path"}, {"name": "x", "in": "header"}]}},
                "/pet/findByStatus": {"get": {"operationId": "findPetsByStatus",
                "parameters": [{"name": "status", "in": "query"}]}}}});
        let params = json!({"petId": 7, "x": "y"});
        let request = operation(
            &swagger,
            "http://pets.test/v2/swagger.json",
            "getPetById",
            params.as_object().expect("an object"),
        );
        assert_eq!(
            request,
            Ok(json!({"uri": "http://pets.test/v2/pet/7", "method": "GET", "headers": {"x": "y"}}))
        );
        let params = json!({"status": "sold out"});
        let request = operation(
            &swagger,
            "https://a/swagger.json",
            "findPetsByStatus",
            params.as_object().expect("an object"),
        );
        assert_eq!(
            request.map(|r| r["uri"].clone()),
            Ok(json!(
                "https://pets.test/v2/pet/findByStatus?status=sold%20out"
            ))
        );
        let oas3 = json!({"openapi": "3.0.0", "servers": [{"url": "/api"}], "paths": {"/a": {"post": {"operationId": "a", "requestBody": {}}}}});
        let params = json!({"body": {"k": 1}});
        let request = operation(
            &oas3,
            "http://h:8/doc.json",
            "a",
            params.as_object().expect("an object"),
        );
        assert_eq!(
            request,
            Ok(
                json!({"uri": "http://h:8/api/a", "method": "POST", "headers": {}, "body": {"k": 1}})
            )
        );
        assert!(operation(&oas3, "http://h", "missing", &Map::new()).is_err());
    }
}
