use std::collections::BTreeSet;

use super::*;

/// A ConfigMap's keys and values as the hash sees them.
fn object(pairs: &[(&str, &str)]) -> Lookup {
    keyed(&ConfigId::config_map("unused"), pairs, None)
}

/// The keys and values of `id` reduced under `key`.
fn keyed(id: &ConfigId, pairs: &[(&str, &str)], key: Option<&SecretKey>) -> Lookup {
    let values = pairs.iter().map(|(k, v)| (*k, v.as_bytes()));
    Lookup::Found(ConfigObject::from_values(id, values, key).expect("a key for Secrets"))
}

/// ConfigMap `app` with these keys and values.
fn app(pairs: &[(&str, &str)]) -> ConfigData {
    ConfigData::from([(ConfigId::config_map("app"), object(pairs))])
}

fn hash_of(consumed: &[Consumed], data: &ConfigData, key: Option<&SecretKey>) -> HashReport {
    let consumed: BTreeSet<Consumed> = consumed.iter().cloned().collect();
    config_hash(&consumed, &BTreeSet::new(), data, key)
}

fn key(name: &str) -> Consumed {
    Consumed::Key(ConfigId::config_map("app"), name.to_owned())
}

#[test]
fn hash_has_the_documented_form() {
    let hash = hash_of(&[key("a")], &app(&[("a", "1")]), None)
        .hash
        .expect("hashed");
    assert!(hash.starts_with("sha256:"));
    assert_eq!(hash.len(), "sha256:".len() + 64);
    assert!(
        hash["sha256:".len()..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
}

#[test]
fn only_consumed_keys_count() {
    let h = |pairs: &[(&str, &str)]| hash_of(&[key("a")], &app(pairs), None).hash;
    let before = h(&[("a", "1"), ("b", "2")]);
    let after = h(&[("a", "1"), ("b", "changed")]);
    assert_eq!(before, after, "an unconsumed key must not change the hash");
    let changed_a = h(&[("a", "2"), ("b", "2")]);
    assert_ne!(before, changed_a, "the consumed key must change the hash");
}

#[test]
fn whole_object_covers_every_key() {
    let id = ConfigId::config_map("app");
    let h =
        |pairs: &[(&str, &str)]| hash_of(&[Consumed::Whole(id.clone())], &app(pairs), None).hash;
    assert_ne!(h(&[("a", "1")]), h(&[("a", "1"), ("b", "2")]));
    assert_ne!(h(&[("a", "1")]), h(&[("a", "2")]));
    assert_ne!(
        h(&[]),
        hash_of(&[Consumed::Whole(id.clone())], &ConfigData::new(), None).hash
    );
}

#[test]
fn absent_object_absent_key_and_empty_value_all_differ() {
    let h = |d: ConfigData| hash_of(&[key("a")], &d, None).hash;
    let absent = h(ConfigData::from([(
        ConfigId::config_map("app"),
        Lookup::NotFound,
    )]));
    let no_key = h(app(&[]));
    let empty = h(app(&[("a", "")]));
    assert!(absent.is_some() && no_key.is_some() && empty.is_some());
    assert_ne!(absent, no_key);
    assert_ne!(no_key, empty);
    assert_ne!(absent, empty);
}

#[test]
fn encoding_is_unambiguous() {
    // ("ab","c") and ("a","bc") must not collide through concatenation.
    assert_ne!(
        hash_of(&[key("ab")], &app(&[("ab", "c")]), None).hash,
        hash_of(&[key("a")], &app(&[("a", "bc")]), None).hash
    );
}

#[test]
fn order_of_references_does_not_matter() {
    let d = ConfigData::from([
        (
            ConfigId::config_map("app"),
            object(&[("a", "1"), ("b", "2")]),
        ),
        (ConfigId::config_map("other"), object(&[("x", "9")])),
    ]);
    let other = Consumed::Key(ConfigId::config_map("other"), "x".to_owned());
    let forward = hash_of(&[key("a"), key("b"), other.clone()], &d, None);
    let backward = hash_of(&[other, key("b"), key("a"), key("a")], &d, None);
    assert_eq!(forward, backward);
}

#[test]
fn configmap_and_secret_of_the_same_name_differ() {
    let secret_key = SecretKey::new(b"k").expect("key");
    let cm = ConfigId::config_map("same");
    let secret = ConfigId::secret("same");
    let d = ConfigData::from([
        (cm.clone(), object(&[("a", "1")])),
        (
            secret.clone(),
            keyed(&secret, &[("a", "1")], Some(&secret_key)),
        ),
    ]);
    let h1 = hash_of(&[Consumed::Key(cm, "a".into())], &d, Some(&secret_key)).hash;
    let h2 = hash_of(&[Consumed::Key(secret, "a".into())], &d, Some(&secret_key)).hash;
    assert_ne!(h1, h2);
}

#[test]
fn secrets_need_a_key_and_depend_on_it() {
    let id = ConfigId::secret("db");
    let values = [("password", "hunter2")];
    assert_eq!(
        ConfigObject::from_values(&id, [("password", b"hunter2")], None),
        None,
        "no key: Secret values cannot even be reduced"
    );
    let consumed = [Consumed::Key(id.clone(), "password".into())];
    let k1 = SecretKey::new(b"key-one").expect("key");
    let k2 = SecretKey::new(b"key-two").expect("key");
    let d1 = ConfigData::from([(id.clone(), keyed(&id, &values, Some(&k1)))]);
    let d2 = ConfigData::from([(id.clone(), keyed(&id, &values, Some(&k2)))]);
    let unkeyed = hash_of(&consumed, &d1, None);
    assert_eq!(unkeyed.hash, None, "no key: Secrets are not hashed");
    assert_eq!(unkeyed.unkeyed_secrets, vec![id.clone()]);
    let h1 = hash_of(&consumed, &d1, Some(&k1)).hash.expect("hashed");
    let h2 = hash_of(&consumed, &d2, Some(&k2)).hash.expect("hashed");
    assert_ne!(
        h1, h2,
        "the HMAC key must matter, or the hash could be brute-forced"
    );
    let bare = format!("{:x}", sha2::Sha256::digest(b"hunter2"));
    assert!(!h1.contains(&bare));
}

#[test]
fn a_failed_lookup_gives_no_hash_and_says_why() {
    let id = ConfigId::config_map("app");
    let report = hash_of(
        &[key("a"), key("b")],
        &ConfigData::from([(id.clone(), Lookup::Failed("timeout".into()))]),
        None,
    );
    assert_eq!(report.hash, None);
    assert_eq!(
        report.failed,
        vec![(id, "timeout".to_owned())],
        "reported once per object"
    );
}

#[test]
fn missing_objects_are_reported_unless_optional() {
    let id = ConfigId::config_map("app");
    let consumed: BTreeSet<Consumed> = [key("a"), Consumed::Whole(id.clone())]
        .into_iter()
        .collect();
    let d = ConfigData::from([(id.clone(), Lookup::NotFound)]);
    let report = config_hash(&consumed, &BTreeSet::new(), &d, None);
    assert_eq!(report.missing, vec![id.clone()]);
    assert!(report.hash.is_some(), "absent still hashes");
    let optional: BTreeSet<ConfigId> = [id].into_iter().collect();
    assert!(
        config_hash(&consumed, &optional, &d, None)
            .missing
            .is_empty()
    );
}

#[test]
fn empty_keys_are_refused_and_keys_are_trimmed() {
    assert!(SecretKey::new(b"  \n").is_none());
    let id = ConfigId::secret("s");
    let consumed = [Consumed::Key(id.clone(), "a".into())];
    let hash = |raw: &[u8]| {
        let key = SecretKey::new(raw);
        let d = ConfigData::from([(id.clone(), keyed(&id, &[("a", "1")], key.as_ref()))]);
        hash_of(&consumed, &d, key.as_ref()).hash
    };
    let (a, b) = (hash(b"abc\n"), hash(b"abc"));
    assert_eq!(a, b);
    assert_eq!(
        format!("{:?}", SecretKey::new(b"abc").expect("key")),
        "SecretKey(<redacted>)"
    );
}

#[test]
fn values_enter_only_as_digests() {
    let cm = ConfigId::config_map("app");
    let reduced = ConfigObject::from_values(&cm, [("a", b"1")], None).expect("reduced");
    assert_eq!(
        reduced.digests["a"],
        <[u8; 32]>::from(sha2::Sha256::digest(b"1")),
        "a ConfigMap value is kept as its SHA-256"
    );
    let secret = ConfigId::secret("db");
    let key = SecretKey::new(b"k").expect("key");
    let keyed = ConfigObject::from_values(&secret, [("a", b"1")], Some(&key)).expect("reduced");
    assert_ne!(
        keyed.digests["a"], reduced.digests["a"],
        "a Secret value only keyed"
    );
    let elsewhere =
        ConfigObject::from_values(&ConfigId::secret("other"), [("a", b"1")], Some(&key));
    assert_ne!(
        elsewhere.expect("reduced").digests["a"],
        keyed.digests["a"],
        "bound to the Secret's name"
    );
}
