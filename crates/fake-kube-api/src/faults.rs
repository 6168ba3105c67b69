//! Injected faults: answer the next N matching requests with an error `Status`, or delay
//! matching requests. Pure bookkeeping; the HTTP layer consults it per request.

use std::time::Duration;

/// Which requests a fault applies to; every field left `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matcher {
    /// HTTP method (`PATCH`).
    pub method: Option<String>,
    /// Resource plural (`deployments`).
    pub resource: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Watch requests only (`Some(true)`) or never (`Some(false)`).
    pub watch: Option<bool>,
    /// Only requests for a collection (a list or watch, no object name).
    pub collection: bool,
}

impl Matcher {
    /// Matches every request.
    pub fn any() -> Self {
        Matcher::default()
    }

    /// Requests with this method and resource plural.
    pub fn new(method: &str, resource: &str) -> Self {
        Matcher::any().method(method).resource(resource)
    }

    /// Restricts to an HTTP method.
    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_ascii_uppercase());
        self
    }

    /// Restricts to a resource plural.
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.to_owned());
        self
    }

    /// Restricts to a namespace.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// Restricts to an object name.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Restricts to requests for a collection (lists and watches, not one object).
    pub fn collection(mut self) -> Self {
        self.collection = true;
        self
    }

    /// Restricts to watch requests (`true`) or to the others (`false`).
    pub fn watch(mut self, watch: bool) -> Self {
        self.watch = Some(watch);
        self
    }

    /// Whether a request with these properties matches.
    pub fn matches(&self, request: &RequestFacts<'_>) -> bool {
        fn field(want: &Option<String>, got: Option<&str>) -> bool {
            want.as_deref().is_none_or(|w| got == Some(w))
        }
        field(&self.method, Some(request.method))
            && field(&self.resource, request.resource)
            && field(&self.namespace, request.namespace)
            && field(&self.name, request.name)
            && self.watch.is_none_or(|w| w == request.watch)
            && !(self.collection && request.name.is_some())
    }
}

/// What a fault matcher looks at.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// Resource plural, if the path names one.
    pub resource: Option<&'a str>,
    /// Namespace from the path.
    pub namespace: Option<&'a str>,
    /// Object name from the path.
    pub name: Option<&'a str>,
    /// Whether it is a watch.
    pub watch: bool,
}

#[derive(Debug)]
struct Failure {
    matcher: Matcher,
    code: u16,
    remaining: usize,
}

/// The faults in force.
#[derive(Debug, Default)]
pub struct Faults {
    failures: Vec<Failure>,
    delays: Vec<(Matcher, Duration)>,
    held: usize,
}

impl Faults {
    /// The next `count` requests matching `matcher` fail with `code`.
    pub fn fail_next(&mut self, matcher: Matcher, code: u16, count: usize) {
        self.failures.push(Failure {
            matcher,
            code,
            remaining: count,
        });
    }

    /// Every request matching `matcher` waits `by` before it is handled.
    pub fn delay(&mut self, matcher: Matcher, by: Duration) {
        self.delays.push((matcher, by));
    }

    /// Removes every fault.
    pub fn clear(&mut self) {
        self.failures.clear();
        self.delays.clear();
    }

    /// The status code this request must fail with, consuming one use of the fault.
    pub fn take_failure(&mut self, request: &RequestFacts<'_>) -> Option<u16> {
        let failure = self
            .failures
            .iter_mut()
            .find(|f| f.remaining > 0 && f.matcher.matches(request))?;
        failure.remaining -= 1;
        let code = failure.code;
        self.failures.retain(|f| f.remaining > 0);
        Some(code)
    }

    /// The total delay for this request (counted in [`Faults::held`] when there is one).
    pub fn delay_for(&mut self, request: &RequestFacts<'_>) -> Duration {
        let delay = self
            .delays
            .iter()
            .filter(|(m, _)| m.matches(request))
            .map(|(_, d)| *d)
            .sum();
        if delay > Duration::ZERO {
            self.held += 1;
        }
        delay
    }

    /// How many requests a delay has held so far (counted as they arrive).
    pub fn held(&self) -> usize {
        self.held
    }
}
