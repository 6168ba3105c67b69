//! End-to-end tests of `reload-injector status`: the real binary against the fake API server
//! over HTTP, with the objects of the golden cases (`tests/fixtures/status/`). They check the
//! exit codes, the one-line errors, the reads made (one LIST per kind per namespace, a log
//! read per sidecar Pod, and nothing the documented RBAC does not grant), and partial reports
//! when a read is forbidden.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fake_kube_api::{FakeApi, Matcher, Rbac};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_reload-injector");

/// The objects of a golden case, loaded into a fresh fake API server, the Lease renewed now.
fn cluster(case: &str) -> (FakeApi, PathBuf) {
    let text =
        std::fs::read_to_string(format!("tests/fixtures/status/{case}.yaml")).expect("read case");
    let case: Value = serde_saphyr::from_str(&text).expect("case parses");
    let api = FakeApi::start();
    let then: Timestamp = case["now"]
        .as_str()
        .expect("now")
        .parse()
        .expect("RFC 3339");
    for object in case["objects"].as_array().expect("objects") {
        let mut object = object.clone();
        // The Lease was renewed as long before now as before the case's `now`.
        if let Some(renewed) = object["spec"]["renewTime"].as_str() {
            let renewed: Timestamp = renewed.parse().expect("RFC 3339");
            let now = Timestamp::now()
                .checked_sub(then.duration_since(renewed))
                .expect("in range");
            object["spec"]["renewTime"] = json!(now.to_string());
        }
        api.apply(object);
    }
    for (read, _) in case["failed"].as_object().into_iter().flatten() {
        let matcher = match read.as_str() {
            "hashKey" => Matcher::new("GET", "secrets").name("reload-injector-hash-key"),
            plural => Matcher::new("GET", plural).namespace("shop"),
        };
        api.fail_next(matcher, 403, 1);
    }
    for (pod, log) in case["logs"].as_object().into_iter().flatten() {
        let (ns, name) = pod.split_once('/').expect("ns/pod");
        api.set_log(
            ns,
            name,
            "config-reloader",
            log.as_str().unwrap_or_default(),
        );
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("status-cli-{}", api.addr().port()));
    let kubeconfig = api.write_kubeconfig(&dir);
    (api, kubeconfig)
}

fn status(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("status")
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run reload-injector status")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited")
}

/// stderr is exactly one line starting with `error:` and containing `want`.
fn one_line_error(output: &Output, want: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(code(output), 2, "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(want),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn a_current_workload_exits_0_with_one_list_per_kind() {
    let (api, kubeconfig) = cluster("current");
    api.clear_requests();
    let out = status(&kubeconfig, &["deploy/web", "-n", "shop"]);
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("All current: nothing to fix."), "{stdout}");
    assert!(stdout.contains("held by \"reload-injector-7d9f-x2k4q-1a2b3c\""));
    assert!(
        stdout.contains(r#"result="success""#),
        "the sidecar's log: {stdout}"
    );
    let requests = api.requests();
    let needs: Vec<_> = requests.iter().filter_map(|r| r.rbac()).collect();
    for plural in ["configmaps", "secrets", "pods", "events", "deployments"] {
        let lists = needs
            .iter()
            .filter(|(_, r, v, ns)| r == plural && v == "list" && ns.as_deref() == Some("shop"))
            .count();
        assert_eq!(lists, 1, "{plural}: {needs:?}");
        let gets = needs
            .iter()
            .filter(|(_, r, v, ns)| r == plural && v == "get" && ns.as_deref() == Some("shop"))
            .count();
        assert_eq!(gets, 0, "no GET per object of {plural}: {needs:?}");
    }
    let logs: Vec<_> = requests
        .iter()
        .filter(|r| r.path.ends_with("/log"))
        .collect();
    assert_eq!(logs.len(), 2, "one log read per sidecar Pod");
    assert!(logs.iter().all(|r| r.query_param("tailLines").is_some()
        && r.query_param("container").as_deref() == Some("config-reloader")));
    // Nothing but reads, and nothing the documented role lacks except the optional Secrets.
    assert!(requests.iter().all(|r| r.method == "GET"));
    let rbac = Rbac::from_yaml_file(Path::new("docs/status-rbac.yaml"), "default");
    let missing = rbac.missing(&needs);
    assert!(
        missing
            .iter()
            .all(|(_, resource, _, _)| resource == "secrets"),
        "the documented role lacks {missing:?}"
    );
}

#[test]
fn a_stale_hash_and_an_eperm_exit_1_and_json_names_them() {
    let (api, kubeconfig) = cluster("stale");
    api.set_log(
        "shop",
        "web-1",
        "config-reloader",
        "2026-11-24T11:40:03Z ERROR reload_injector::watch::runner: failed to send SIGHUP to nginx[7]: \
         permission denied; not retried until the content changes again result=permission_denied\n",
    );
    let out = status(&kubeconfig, &["deployment/web", "-n", "shop", "-o", "json"]);
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let codes: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert_eq!(codes, ["stale", "reload-failed"], "{report:#}");
    assert_eq!(report["exitCode"], 1);
    assert_eq!(report["hash"]["state"], "stale");
    assert!(
        report["findings"][1]["fix"]
            .as_str()
            .unwrap()
            .contains("runAsUser")
    );
    assert!(!text(&out.stdout).contains("hunter2"), "no Secret value");
}

#[test]
fn a_namespace_not_opted_in_gets_the_kubectl_label_fix() {
    let (_api, kubeconfig) = cluster("not-opted-in");
    let out = status(&kubeconfig, &["deploy/web", "-n", "shop"]);
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stdout)
            .contains("fix: kubectl label namespace shop reload-injector.io/inject=enabled"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn no_running_controller_is_a_finding() {
    let (api, kubeconfig) = cluster("current");
    api.merge(
        "leases",
        "reload-injector",
        "reload-injector",
        json!({"spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}}),
    )
    .expect("lease exists");
    let out = status(&kubeconfig, &["deploy/web", "-n", "shop"]);
    assert_eq!(code(&out), 1);
    assert!(text(&out.stdout).contains("[no-controller] no controller is running"));
}

#[test]
fn a_forbidden_read_gives_a_partial_report_naming_it() {
    let (api, kubeconfig) = cluster("current");
    api.fail_next(Matcher::new("GET", "secrets"), 403, 2);
    let out = status(&kubeconfig, &["deploy/web", "-n", "shop"]);
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}");
    assert!(
        stdout.contains("could not read secrets: forbidden"),
        "{stdout}"
    );
    assert!(stdout.contains("Secrets cannot be checked"), "{stdout}");
    assert!(stdout.contains("5. Pods"), "the rest is reported: {stdout}");
}

#[test]
fn bad_targets_and_missing_objects_exit_2_with_one_line() {
    let (_api, kubeconfig) = cluster("current");
    one_line_error(&status(&kubeconfig, &["web"]), "expected KIND/NAME");
    one_line_error(&status(&kubeconfig, &["svc/web"]), "unknown kind \"svc\"");
    one_line_error(
        &status(&kubeconfig, &["deploy/nope", "-n", "shop"]),
        "deploy \"nope\" not found in namespace \"shop\"",
    );
    one_line_error(
        &status(&kubeconfig, &["deploy/web", "-n", "nowhere"]),
        "namespace \"nowhere\" not found",
    );
    // Served or not (Argo Rollouts), a rollout that is not there is an exit 2 naming rollouts.
    one_line_error(
        &status(&kubeconfig, &["rollout/web", "-n", "shop"]),
        "rollout",
    );
    one_line_error(
        &status(&kubeconfig, &["-A", "deploy/web"]),
        "-A/--all-namespaces takes no TARGET",
    );
    one_line_error(
        &status(
            &kubeconfig,
            &["deploy/web", "-n", "shop", "--context", "nope"],
        ),
        "failed to load the kubeconfig",
    );
    let named = status(
        &kubeconfig,
        &["deploy/web", "-n", "shop", "--context", "fake"],
    );
    assert_eq!(code(&named), 0, "{}", text(&named.stderr));
}

#[test]
fn an_unreachable_api_server_exits_2_with_one_line() {
    let (api, kubeconfig) = cluster("current");
    drop(api);
    one_line_error(
        &status(&kubeconfig, &["deploy/web", "-n", "shop"]),
        "failed to reach the API server",
    );
}

#[test]
fn without_a_target_one_line_per_workload_problems_first() {
    let (api, kubeconfig) = cluster("summary-all-namespaces");
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
    let out = status(&kubeconfig, &["-n", "shop"]);
    assert_eq!(code(&out), 1);
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("shop/deploy/api") && lines[0].contains("stale"),
        "{stdout}"
    );
    assert!(lines[1].starts_with("shop/deploy/worker") && lines[1].contains("not-stamped"));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("shop/deploy/web") && l.ends_with("ok"))
    );
    assert!(!stdout.contains("tools/"), "only the namespace asked for");

    let all = status(&kubeconfig, &["-A", "-o", "json"]);
    let summary: Value = serde_json::from_slice(&all.stdout).expect("JSON");
    let names: Vec<&str> = summary["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"dash") && names.contains(&"web"),
        "{names:?}"
    );
    // The context's namespace is the default: `default` holds nothing here.
    let default = status(&kubeconfig, &[]);
    assert_eq!(code(&default), 0);
    assert_eq!(text(&default.stdout), "no workloads found\n");
}

#[test]
fn pod_configmap_and_secret_targets() {
    let (_api, kubeconfig) = cluster("current");
    let pod = status(&kubeconfig, &["pod/web-1", "-n", "shop"]);
    assert_eq!(code(&pod), 0, "{}", text(&pod.stderr));
    assert!(text(&pod.stdout).starts_with("Pod shop/web-1\n"));
    let cm = status(
        &kubeconfig,
        &["configmaps/web-env", "-n", "shop", "-o", "json"],
    );
    assert_eq!(code(&cm), 0, "{}", text(&cm.stderr));
    let report: Value = serde_json::from_slice(&cm.stdout).expect("JSON");
    assert_eq!(report["keys"][0]["key"], "mode");
    assert_eq!(report["keys"][0]["readers"][0]["workload"], "deploy/web");
    assert_eq!(report["keys"][0]["readers"][0]["onChange"], "rollout");
    assert_eq!(
        report["keys"][1]["readers"],
        json!([]),
        "nothing reads \"unused\""
    );
    let secret = status(&kubeconfig, &["secret/db", "-n", "shop"]);
    assert_eq!(code(&secret), 0);
    let stdout = text(&secret.stdout);
    assert!(stdout.contains("key \"password\""), "{stdout}");
    assert!(!stdout.contains("hunter2"), "never a value");
    one_line_error(
        &status(&kubeconfig, &["cm/nope", "-n", "shop"]),
        "cm \"nope\" not found",
    );
    one_line_error(
        &status(&kubeconfig, &["pod/nope", "-n", "shop"]),
        "pod \"nope\" not found",
    );
}

/// prometheus-operator names its own reloader `config-reloader`: status never takes it for ours
/// (no log read, no restarts of ours, no sidecar expected), and says what it already reloads.
#[test]
fn someone_elses_config_reloader_is_not_our_sidecar() {
    let (api, kubeconfig) = cluster("prometheus-operator");
    api.set_log(
        "monitoring",
        "prometheus-k8s-0",
        "config-reloader",
        "level=info msg=\"Reload triggered\"\n",
    );
    api.clear_requests();
    let out = status(
        &kubeconfig,
        &["sts/prometheus-k8s", "-n", "monitoring", "-o", "json"],
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(code(&out), 1, "the subPath mount: {report:#}");
    let codes: Vec<&str> = (report["findings"].as_array().unwrap().iter())
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["subpath"], "no sidecar-restarts, no no-sidecar");
    assert_eq!(report["pods"]["withSidecar"], 0);
    assert_eq!(report["pods"]["items"][0]["sidecar"], false);
    assert_eq!(report["pods"]["items"][0]["sidecarRestarts"], Value::Null);
    let logs = api
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/log"));
    assert_eq!(logs.count(), 0, "never the log of someone else's container");
    let rules = (report["reads"].as_array().unwrap().iter())
        .find(|r| r["container"] == "prometheus" && r["volume"] == "prometheus-k8s-rulefiles-0")
        .expect("the rule files read");
    assert_eq!(rules["onChange"], "alreadyReloaded");
    assert_eq!(rules["reloadedBy"], "config-reloader");
}

/// Every golden case, loaded into the fake API server and reported by the binary, finds what
/// its golden says (the finding codes and the exit code). With `STATUS_TRANSCRIPTS=DIR`, the
/// text form of each is written to `DIR/CASE.txt`.
#[test]
fn every_golden_case_finds_the_same_against_the_api_server() {
    let mut checked = 0;
    for entry in std::fs::read_dir("tests/fixtures/status").expect("fixtures") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(case_name) = name
            .strip_suffix(".yaml")
            .filter(|n| !n.contains(".golden"))
        else {
            continue;
        };
        let case: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).expect("case");
        let golden: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("tests/fixtures/status/{case_name}.golden.json"))
                .expect("golden"),
        )
        .expect("golden JSON");
        // Every kind a case holds is served: none is left to the goldens alone.
        for object in case["objects"].as_array().unwrap() {
            let (api_version, kind) = (
                object["apiVersion"].as_str().unwrap_or_default(),
                object["kind"].as_str().unwrap_or_default(),
            );
            assert!(
                fake_kube_api::resources::by_kind(api_version, kind).is_some(),
                "{case_name}: the fake API does not serve {api_version} {kind}"
            );
        }
        let (api, kubeconfig) = cluster(case_name);
        if case["namespace"].is_string() {
            api.apply(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "default"}}));
        }
        let mut args: Vec<String> = Vec::new();
        if let Some(target) = case["target"].as_str() {
            args.push(target.to_owned());
        }
        match case["namespace"].as_str() {
            Some(ns) => args.extend(["-n".to_owned(), ns.to_owned()]),
            None => args.push("-A".to_owned()),
        }
        if let Some(dir) = std::env::var_os("STATUS_TRANSCRIPTS") {
            // A transcript of the text form, for people (the issue's closing note).
            let shown: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = status(&kubeconfig, &shown);
            let transcript = format!(
                "$ kubectl reload-injector status {}\n{}{}(exit {})\n",
                shown.join(" "),
                text(&out.stdout),
                text(&out.stderr),
                code(&out)
            );
            std::fs::write(Path::new(&dir).join(format!("{case_name}.txt")), transcript)
                .expect("write transcript");
        }
        args.extend(["-o".to_owned(), "json".to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = status(&kubeconfig, &args);
        let got: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{case_name}: {e}: {}", text(&out.stderr)));
        assert_eq!(got["exitCode"], golden["exitCode"], "{case_name}: {got:#}");
        assert_eq!(
            code(&out),
            golden["exitCode"].as_i64().unwrap() as i32,
            "{case_name}"
        );
        let codes = |v: &Value| -> Vec<String> {
            let findings = v["findings"].as_array().cloned().unwrap_or_default();
            let summary = v["workloads"].as_array().cloned().unwrap_or_default();
            findings
                .iter()
                .map(|f| f["code"].as_str().unwrap().to_owned())
                .chain(
                    summary
                        .iter()
                        .map(|w| format!("{}: {}", w["name"], w["findings"])),
                )
                .collect()
        };
        assert_eq!(codes(&got), codes(&golden), "{case_name}");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} cases");
}

/// Installed as the kubectl plugin `kubectl-reload_injector`, usage shows how kubectl runs it.
#[test]
fn as_a_kubectl_plugin_usage_shows_kubectl_reload_injector() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("status-plugin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plugin = dir.join("kubectl-reload_injector");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(BIN, &plugin).unwrap();
    let out = Command::new(&plugin)
        .args(["status", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = text(&out.stdout);
    assert!(
        help.contains("Usage: kubectl reload-injector status [OPTIONS] [TARGET]"),
        "{help}"
    );
    let out = Command::new(BIN)
        .args(["status", "--help"])
        .output()
        .unwrap();
    assert!(text(&out.stdout).contains("Usage: reload-injector status"));
    std::fs::remove_dir_all(&dir).unwrap();
}
