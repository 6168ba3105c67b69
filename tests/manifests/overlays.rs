//! The cert-manager overlay and the overlay written by `certs/generate.sh`.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::tools::{find, is_cert_manager, render, repo};
use super::{NAMESPACE, b64, base, cert_manager, generated, webhooks};

/// Keys of `value` (an object) that are not in `allowed`.
fn unknown_keys<'a>(value: &'a Value, allowed: &[&str]) -> Vec<&'a str> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect()
}

#[test]
fn cert_manager_overlay_issues_the_serving_cert_and_injects_the_ca() {
    let objects = cert_manager();
    let hooks_config = find(&objects, "MutatingWebhookConfiguration", "reload-injector");
    let inject_from = hooks_config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .expect("inject-ca-from annotation");
    let (ns, cert_name) = inject_from.split_once('/').unwrap();
    assert_eq!(ns, NAMESPACE);
    let serving = find(&objects, "Certificate", cert_name);
    assert_eq!(serving["spec"]["secretName"], "reload-injector-tls");
    let names =
        reload_injector::certs::service_dns_names("reload-injector", NAMESPACE, &[]).unwrap();
    assert_eq!(serving["spec"]["dnsNames"], json!(names));
    assert!(
        serving["spec"]["usages"]
            .as_array()
            .unwrap()
            .contains(&json!("server auth"))
    );
    assert!(
        serving["spec"]["renewBefore"].is_string(),
        "no renewal margin"
    );

    // Chain: serving cert <- CA Issuer <- CA Certificate <- self-signed Issuer.
    let ca_issuer = find(
        &objects,
        "Issuer",
        serving["spec"]["issuerRef"]["name"].as_str().unwrap(),
    );
    let ca_secret = &ca_issuer["spec"]["ca"]["secretName"];
    let ca_cert = objects
        .iter()
        .find(|o| o["kind"] == "Certificate" && &o["spec"]["secretName"] == ca_secret)
        .expect("a Certificate makes the CA Issuer's Secret");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    let root = find(
        &objects,
        "Issuer",
        ca_cert["spec"]["issuerRef"]["name"].as_str().unwrap(),
    );
    assert_eq!(root["spec"], json!({"selfSigned": {}}));

    // cert-manager's schemas (checked in rendered_base_and_overlays_pass_strict_schema_validation)
    // do not reject unknown fields, so the field names are checked here, explicitly.
    for obj in objects.iter().filter(|o| is_cert_manager(o)) {
        let name = &obj["metadata"]["name"];
        assert!(unknown_keys(obj, &["apiVersion", "kind", "metadata", "spec"]).is_empty());
        let meta = unknown_keys(
            &obj["metadata"],
            &["name", "namespace", "labels", "annotations"],
        );
        assert!(meta.is_empty(), "{name}: {meta:?}");
        assert_eq!(obj["metadata"]["namespace"], NAMESPACE);
        let spec = &obj["spec"];
        let extra = match obj["kind"].as_str().unwrap() {
            "Certificate" => {
                let pk = unknown_keys(
                    &spec["privateKey"],
                    &["algorithm", "size", "rotationPolicy", "encoding"],
                );
                assert!(pk.is_empty(), "{name}: {pk:?}");
                let issuer = unknown_keys(&spec["issuerRef"], &["name", "kind", "group"]);
                assert!(issuer.is_empty(), "{name}: {issuer:?}");
                let allowed = [
                    "secretName",
                    "duration",
                    "renewBefore",
                    "commonName",
                    "dnsNames",
                ];
                let more = ["usages", "privateKey", "issuerRef", "isCA"];
                unknown_keys(spec, &[allowed.as_slice(), more.as_slice()].concat())
            }
            "Issuer" => unknown_keys(spec, &["selfSigned", "ca"]),
            other => panic!("unexpected cert-manager kind {other}"),
        };
        assert!(extra.is_empty(), "{name}: unknown fields {extra:?}");
    }

    // Apart from cert-manager's objects and the annotation, the overlay is the base.
    let mut stripped: Vec<Value> = objects
        .into_iter()
        .filter(|o| !is_cert_manager(o))
        .collect();
    for obj in &mut stripped {
        if obj["kind"] == "MutatingWebhookConfiguration" {
            obj["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("annotations");
        }
    }
    assert_eq!(stripped, base());
}

fn secret<'a>(objects: &'a [Value], name: &str) -> &'a Value {
    let secret = find(objects, "Secret", name);
    assert_eq!(secret["metadata"]["namespace"], NAMESPACE);
    secret
}

fn ca_bundle(objects: &[Value]) -> Vec<u8> {
    let hooks = webhooks(objects);
    let bundle = b64(&hooks[0]["clientConfig"]["caBundle"]);
    assert_eq!(
        hooks[1]["clientConfig"]["caBundle"],
        hooks[0]["clientConfig"]["caBundle"]
    );
    bundle
}

fn generate(out: &Path, flag: &str) -> std::process::Output {
    Command::new(repo().join("certs/generate.sh"))
        .args([
            "--out",
            out.to_str().unwrap(),
            "--bin",
            env!("CARGO_BIN_EXE_reload-injector"),
            flag,
        ])
        .output()
        .unwrap()
}

#[test]
fn generated_overlay_carries_the_certificate_key_and_ca_bundle() {
    let out = generated("generated-overlay");
    let files = out.join("files");
    let read = |name: &str| fs::read(files.join(name)).unwrap();
    let objects = render(&out);

    assert_eq!(ca_bundle(&objects), read("ca.crt"));
    let tls = secret(&objects, "reload-injector-tls");
    assert_eq!(tls["type"], "kubernetes.io/tls");
    assert_eq!(b64(&tls["data"]["tls.crt"]), read("tls.crt"));
    assert_eq!(b64(&tls["data"]["tls.key"]), read("tls.key"));
    let key = secret(&objects, "reload-injector-hash-key");
    // The Deployment reads the key file named like the Secret's key.
    assert_eq!(
        b64(&key["data"]["secret-hash.key"]),
        read("secret-hash.key")
    );
    assert_eq!(key["data"].as_object().unwrap().len(), 1);

    // Without the Secrets and caBundle, it is the base.
    let mut stripped: Vec<Value> = objects
        .into_iter()
        .filter(|o| o["kind"] != "Secret")
        .collect();
    for hook in stripped
        .iter_mut()
        .filter(|o| o["kind"] == "MutatingWebhookConfiguration")
        .flat_map(|o| o["webhooks"].as_array_mut().unwrap())
    {
        hook["clientConfig"]
            .as_object_mut()
            .unwrap()
            .remove("caBundle");
    }
    assert_eq!(stripped, base());

    // Private material is not world-readable.
    use std::os::unix::fs::PermissionsExt;
    for name in ["secret-tls.yaml", "secret-hash-key.yaml"] {
        let mode = fs::metadata(out.join(name)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{name} is readable by others");
    }
}

#[test]
fn rotation_trusts_both_cas_keeps_the_hash_key_and_never_clobbers() {
    let out = generated("generated-rotation");
    let files = out.join("files");
    let old_ca = fs::read(files.join("ca.crt")).unwrap();
    let old_cert = fs::read(files.join("tls.crt")).unwrap();
    let hash_key = fs::read(files.join("secret-hash.key")).unwrap();

    // A second plain run refuses and changes nothing.
    let again = generate(&out, "--");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--rotate"));
    assert_eq!(fs::read(files.join("ca.crt")).unwrap(), old_ca);

    let rotated = generate(&out, "--rotate");
    assert!(
        rotated.status.success(),
        "{}",
        String::from_utf8_lossy(&rotated.stderr)
    );
    let new_ca = fs::read(files.join("ca.crt")).unwrap();
    assert_ne!(new_ca, old_ca);
    assert_ne!(fs::read(files.join("tls.crt")).unwrap(), old_cert);
    assert_eq!(fs::read(files.join("secret-hash.key")).unwrap(), hash_key);
    let objects = render(&out);
    assert_eq!(ca_bundle(&objects), [new_ca.clone(), old_ca].concat());
    let key = secret(&objects, "reload-injector-hash-key");
    assert_eq!(b64(&key["data"]["secret-hash.key"]), hash_key);

    // Once the pods serve the new certificate, drop the previous CA.
    fs::remove_dir_all(out.join("previous")).unwrap();
    let rendered = generate(&out, "--render-only");
    assert!(rendered.status.success());
    assert_eq!(ca_bundle(&render(&out)), new_ca);
}
