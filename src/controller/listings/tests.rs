use super::*;
use crate::controller::write_target::TargetKind;

const PODS: Stream = Stream::Targets(TargetKind::Pod);
const DEPLOYMENTS: Stream = Stream::Targets(TargetKind::Deployment);

fn scope(kind: ConfigKind, namespace: &str) -> Source {
    Source::Config(Scope::new(kind, namespace))
}

fn list(listings: &mut Listings, source: Source, names: &[&str]) -> Option<HashSet<String>> {
    listings.init(source.clone());
    for name in names {
        listings.saw(&source, || (*name).to_owned());
    }
    listings.done(source)
}

fn both(listings: &mut Listings, namespace: &str) {
    for kind in [ConfigKind::ConfigMap, ConfigKind::Secret] {
        list(listings, scope(kind, namespace), &[]);
    }
}

#[test]
fn a_relist_hands_back_what_it_listed_for_every_kind_of_watch() {
    let mut listings = Listings::default();
    let pods = Source::Cluster(PODS);
    let listed = list(&mut listings, pods.clone(), &["shop/a", "shop/b"]).unwrap();
    assert_eq!(listed, HashSet::from(["shop/a".into(), "shop/b".into()]));
    assert!(listings.is_listed(&pods));
    let maps = scope(ConfigKind::ConfigMap, "shop");
    let listed = list(&mut listings, maps.clone(), &["web"]).unwrap();
    assert_eq!(listed, HashSet::from(["web".into()]));
    // Names seen outside a list are no part of the next one.
    listings.saw(&maps, || "late".into());
    listings.init(maps.clone());
    assert!(
        !listings.is_listed(&maps),
        "listing again: a GET would race it"
    );
    listings.saw(&maps, || "api".into());
    assert_eq!(listings.done(maps), Some(HashSet::from(["api".into()])));
    assert_eq!(
        listings.done(pods),
        None,
        "no list under way: nothing to sweep"
    );
}

#[test]
fn config_watches_start_once_every_served_workload_and_pod_watch_has_listed() {
    let mut listings = Listings::default();
    assert!(!listings.start_configs(), "nothing served yet");
    listings.serve(HashSet::from([Stream::Namespaces, PODS, DEPLOYMENTS]));
    list(&mut listings, Source::Cluster(PODS), &[]);
    assert!(!listings.start_configs(), "Deployments have not listed");
    list(&mut listings, Source::Cluster(DEPLOYMENTS), &[]);
    assert!(!listings.configs_started());
    assert!(listings.start_configs(), "namespaces need not have listed");
    assert!(listings.configs_started());
    assert!(!listings.start_configs(), "once");
}

#[test]
fn the_view_syncs_once_when_every_stream_and_opted_in_namespace_has_settled() {
    let mut listings = Listings::default();
    let opted_in = ["shop".to_owned(), "bank".to_owned()];
    assert!(!listings.sync(opted_in.iter()), "nothing served yet");
    listings.serve(HashSet::from([Stream::Namespaces, PODS]));
    list(&mut listings, Source::Cluster(Stream::Namespaces), &[]);
    list(&mut listings, Source::Cluster(PODS), &[]);
    both(&mut listings, "shop");
    list(&mut listings, scope(ConfigKind::ConfigMap, "bank"), &[]);
    assert!(
        !listings.sync(opted_in.iter()),
        "bank's Secrets have not listed"
    );
    listings.refuse(Scope::new(ConfigKind::Secret, "bank"));
    assert!(!listings.is_listed(&scope(ConfigKind::Secret, "bank")));
    assert!(listings.sync(opted_in.iter()), "a refused list settles too");
    assert!(listings.synced());
    assert!(!listings.sync(opted_in.iter()), "once");
}

#[test]
fn a_stream_discovery_stops_serving_holds_nothing_back_and_a_new_one_must_list() {
    let mut listings = Listings::default();
    let cronjobs = Stream::Targets(TargetKind::CronJob);
    listings.serve(HashSet::from([PODS, cronjobs]));
    list(&mut listings, Source::Cluster(PODS), &[]);
    list(&mut listings, Source::Cluster(cronjobs), &[]);
    listings.serve(HashSet::from([PODS]));
    listings.serve(HashSet::from([PODS, cronjobs]));
    assert!(
        !listings.sync(std::iter::empty()),
        "served again: it must list again"
    );
    list(&mut listings, Source::Cluster(cronjobs), &[]);
    assert!(listings.sync(std::iter::empty()));
}

#[test]
fn a_namespace_that_opts_out_is_forgotten_and_must_list_again() {
    let mut listings = Listings::default();
    listings.serve(HashSet::from([PODS]));
    list(&mut listings, Source::Cluster(PODS), &[]);
    both(&mut listings, "shop");
    listings.forget_namespace("shop");
    assert!(!listings.is_listed(&scope(ConfigKind::ConfigMap, "shop")));
    assert!(
        listings.is_listed(&Source::Cluster(PODS)),
        "other watches stay"
    );
    let opted_in = ["shop".to_owned()];
    assert!(!listings.sync(opted_in.iter()));
    both(&mut listings, "shop");
    assert!(listings.sync(opted_in.iter()));
}
