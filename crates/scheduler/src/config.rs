//! `KubeSchedulerConfiguration` (`kubescheduler.config.k8s.io/v1`): profiles with
//! plugins enabled/disabled per extension point and weights, pluginConfig args,
//! `percentageOfNodesToScore` and HTTP extenders. Errors name the field path.

use std::collections::HashSet;
use std::time::Duration;

use serde::Deserialize;

use crate::framework::{PluginName, Profile};
use crate::plugins::node_resources::{FitArgs, ResourceName, Strategy};

pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading scheduler config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("scheduler config: {0}")]
    Parse(#[from] serde_yaml::Error),
    #[error("scheduler config: {field}: {reason}")]
    Invalid { field: String, reason: String },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

// Some fields are accepted so kube-scheduler files load, and are not read.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileConfig {
    api_version: Option<String>,
    kind: Option<String>,
    percentage_of_nodes_to_score: Option<i32>,
    #[serde(default)]
    profiles: Vec<FileProfile>,
    #[serde(default)]
    extenders: Vec<FileExtender>,
    // Accepted for compatibility with kube-scheduler files; not used by cairn.
    parallelism: Option<i32>,
    leader_election: Option<serde_json::Value>,
    client_connection: Option<serde_json::Value>,
    pod_initial_backoff_seconds: Option<i64>,
    pod_max_backoff_seconds: Option<i64>,
    delay_cache_until_active: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileProfile {
    scheduler_name: Option<String>,
    percentage_of_nodes_to_score: Option<i32>,
    plugins: Option<FilePlugins>,
    #[serde(default)]
    plugin_config: Vec<FilePluginConfig>,
}

// Extension points other than filter/score/postFilter/multiPoint are accepted, not read.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FilePlugins {
    multi_point: Option<PluginSet>,
    filter: Option<PluginSet>,
    score: Option<PluginSet>,
    // The extension points cairn runs as part of filter/score are accepted as-is.
    pre_enqueue: Option<PluginSet>,
    queue_sort: Option<PluginSet>,
    pre_filter: Option<PluginSet>,
    post_filter: Option<PluginSet>,
    pre_score: Option<PluginSet>,
    reserve: Option<PluginSet>,
    permit: Option<PluginSet>,
    pre_bind: Option<PluginSet>,
    bind: Option<PluginSet>,
    post_bind: Option<PluginSet>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PluginSet {
    #[serde(default)]
    enabled: Vec<FilePlugin>,
    #[serde(default)]
    disabled: Vec<FilePlugin>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FilePlugin {
    name: String,
    weight: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FilePluginConfig {
    name: String,
    args: serde_json::Value,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileExtender {
    url_prefix: String,
    filter_verb: Option<String>,
    preempt_verb: Option<String>,
    prioritize_verb: Option<String>,
    bind_verb: Option<String>,
    weight: Option<i64>,
    #[serde(rename = "enableHTTPS", default)]
    enable_https: bool,
    tls_config: Option<serde_json::Value>,
    http_timeout: Option<String>,
    #[serde(default)]
    node_cache_capable: bool,
    #[serde(default)]
    managed_resources: Vec<ManagedResource>,
    #[serde(default)]
    ignorable: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedResource {
    pub name: String,
    #[serde(default)]
    pub ignored_by_scheduler: bool,
}

/// One HTTP extender, resolved.
#[derive(Debug, Clone)]
pub struct ExtenderConfig {
    pub url_prefix: String,
    pub filter_verb: Option<String>,
    pub prioritize_verb: Option<String>,
    pub bind_verb: Option<String>,
    pub weight: i64,
    pub enable_https: bool,
    pub http_timeout: Duration,
    pub node_cache_capable: bool,
    pub managed_resources: Vec<ManagedResource>,
    pub ignorable: bool,
}

/// The whole resolved configuration.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub profiles: Vec<Profile>,
    pub extenders: Vec<ExtenderConfig>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            profiles: vec![Profile::default_profile(DEFAULT_SCHEDULER_NAME)],
            extenders: Vec::new(),
        }
    }
}

impl SchedulerConfig {
    pub fn load(path: &std::path::Path) -> Result<SchedulerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<SchedulerConfig, ConfigError> {
        let file: FileConfig = serde_yaml::from_str(text)?;
        if let Some(v) = file.api_version.as_deref() {
            if v != "kubescheduler.config.k8s.io/v1" {
                return Err(invalid(
                    "apiVersion",
                    format!("unsupported {v:?}, want \"kubescheduler.config.k8s.io/v1\""),
                ));
            }
        }
        if let Some(k) = file
            .kind
            .as_deref()
            .filter(|k| *k != "KubeSchedulerConfiguration")
        {
            return Err(invalid(
                "kind",
                format!("unsupported {k:?}, want \"KubeSchedulerConfiguration\""),
            ));
        }
        check_percentage(
            "percentageOfNodesToScore",
            file.percentage_of_nodes_to_score,
        )?;
        let mut profiles = Vec::new();
        let mut names = HashSet::new();
        let file_profiles = if file.profiles.is_empty() {
            vec![FileProfile::default()]
        } else {
            file.profiles
        };
        for (i, fp) in file_profiles.into_iter().enumerate() {
            let p = resolve_profile(
                &format!("profiles[{i}]"),
                fp,
                file.percentage_of_nodes_to_score,
            )?;
            if !names.insert(p.scheduler_name.clone()) {
                return Err(invalid(
                    format!("profiles[{i}].schedulerName"),
                    format!("duplicate profile {:?}", p.scheduler_name),
                ));
            }
            profiles.push(p);
        }
        let extenders = file
            .extenders
            .into_iter()
            .enumerate()
            .map(|(i, e)| resolve_extender(&format!("extenders[{i}]"), e))
            .collect::<Result<Vec<_>, _>>()?;
        if extenders.iter().filter(|e| e.bind_verb.is_some()).count() > 1 {
            return Err(invalid("extenders", "only one extender can implement bind"));
        }
        Ok(SchedulerConfig {
            profiles,
            extenders,
        })
    }

    pub fn profile(&self, scheduler_name: &str) -> Option<&Profile> {
        self.profiles
            .iter()
            .find(|p| p.scheduler_name == scheduler_name)
    }
}

fn check_percentage(field: &str, p: Option<i32>) -> Result<(), ConfigError> {
    match p {
        Some(v) if !(0..=100).contains(&v) => {
            Err(invalid(field, format!("{v} is not in the range [0, 100]")))
        }
        _ => Ok(()),
    }
}

fn plugin_name(field: &str, name: &str) -> Result<PluginName, ConfigError> {
    PluginName::parse(name).ok_or_else(|| invalid(field, format!("unknown plugin {name:?}")))
}

/// Applies one extension point's enabled/disabled lists to `list`.
fn apply_set(
    field: &str,
    set: &PluginSet,
    list: &mut Vec<(PluginName, i64)>,
    keep: fn(PluginName) -> bool,
) -> Result<(), ConfigError> {
    for (j, d) in set.disabled.iter().enumerate() {
        if d.name == "*" {
            list.clear();
        } else {
            let p = plugin_name(&format!("{field}.disabled[{j}].name"), &d.name)?;
            list.retain(|(q, _)| *q != p);
        }
    }
    for (j, e) in set.enabled.iter().enumerate() {
        let f = format!("{field}.enabled[{j}]");
        let p = plugin_name(&format!("{f}.name"), &e.name)?;
        if !keep(p) {
            continue;
        }
        let weight = match e.weight {
            Some(w) if w < 0 => {
                return Err(invalid(
                    format!("{f}.weight"),
                    format!("{w} must not be negative"),
                ))
            }
            Some(0) | None => list.iter().find(|(q, _)| *q == p).map_or(1, |(_, w)| *w),
            Some(w) => w,
        };
        list.retain(|(q, _)| *q != p);
        list.push((p, weight));
    }
    Ok(())
}

fn resolve_profile(
    field: &str,
    fp: FileProfile,
    global_pct: Option<i32>,
) -> Result<Profile, ConfigError> {
    let name = fp
        .scheduler_name
        .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.into());
    let mut p = Profile::default_profile(&name);
    check_percentage(
        &format!("{field}.percentageOfNodesToScore"),
        fp.percentage_of_nodes_to_score,
    )?;
    p.percentage_of_nodes_to_score = fp.percentage_of_nodes_to_score.or(global_pct);
    let mut filters: Vec<(PluginName, i64)> = p.filters.iter().map(|f| (*f, 0)).collect();
    if let Some(plugins) = &fp.plugins {
        if let Some(mp) = &plugins.multi_point {
            let f = format!("{field}.plugins.multiPoint");
            apply_set(&f, mp, &mut filters, PluginName::has_filter)?;
            apply_set(&f, mp, &mut p.scores, PluginName::has_score)?;
        }
        if let Some(s) = &plugins.filter {
            apply_set(&format!("{field}.plugins.filter"), s, &mut filters, |_| {
                true
            })?;
        }
        if let Some(s) = &plugins.score {
            apply_set(&format!("{field}.plugins.score"), s, &mut p.scores, |_| {
                true
            })?;
        }
        if let Some(s) = &plugins.post_filter {
            let named = |list: &[FilePlugin]| {
                list.iter()
                    .any(|x| x.name == "DefaultPreemption" || x.name == "*")
            };
            if named(&s.disabled) {
                p.preemption = false;
            }
            if s.enabled.iter().any(|x| x.name == "DefaultPreemption") {
                p.preemption = true;
            }
        }
    }
    for (f, _) in &filters {
        if !f.has_filter() {
            return Err(invalid(
                format!("{field}.plugins.filter"),
                format!("plugin {:?} does not extend filter", f.as_str()),
            ));
        }
    }
    for (s, _) in &p.scores {
        if !s.has_score() {
            return Err(invalid(
                format!("{field}.plugins.score"),
                format!("plugin {:?} does not extend score", s.as_str()),
            ));
        }
    }
    p.filters = filters.into_iter().map(|(f, _)| f).collect();
    for (i, pc) in fp.plugin_config.iter().enumerate() {
        apply_plugin_args(&format!("{field}.pluginConfig[{i}]"), pc, &mut p)?;
    }
    Ok(p)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpec {
    name: String,
    #[serde(default = "one")]
    weight: i64,
}

fn one() -> i64 {
    1
}

fn resources(
    field: &str,
    v: &serde_json::Value,
) -> Result<Option<Vec<(ResourceName, i64)>>, ConfigError> {
    let Some(list) = v.get("resources") else {
        return Ok(None);
    };
    let specs: Vec<ResourceSpec> = serde_json::from_value(list.clone())
        .map_err(|e| invalid(format!("{field}.resources"), e.to_string()))?;
    for (i, r) in specs.iter().enumerate() {
        if !(1..=100).contains(&r.weight) {
            return Err(invalid(
                format!("{field}.resources[{i}].weight"),
                format!("{} is not in the range [1, 100]", r.weight),
            ));
        }
    }
    Ok(Some(
        specs
            .into_iter()
            .map(|r| (ResourceName::parse(&r.name), r.weight))
            .collect(),
    ))
}

fn apply_plugin_args(
    field: &str,
    pc: &FilePluginConfig,
    p: &mut Profile,
) -> Result<(), ConfigError> {
    let args = &pc.args;
    let f = format!("{field}.args");
    match pc.name.as_str() {
        "NodeResourcesFit" => {
            let Some(strategy) = args.get("scoringStrategy") else {
                return Ok(());
            };
            let sf = format!("{f}.scoringStrategy");
            let kind = strategy
                .get("type")
                .and_then(|t| t.as_str())
                .unwrap_or("LeastAllocated");
            p.fit = FitArgs {
                strategy: match kind {
                    "LeastAllocated" => Strategy::LeastAllocated,
                    "MostAllocated" => Strategy::MostAllocated,
                    "RequestedToCapacityRatio" => {
                        Strategy::RequestedToCapacityRatio(shape(&sf, strategy)?)
                    }
                    other => {
                        return Err(invalid(
                            format!("{sf}.type"),
                            format!("unsupported scoring strategy {other:?}"),
                        ))
                    }
                },
                resources: resources(&sf, strategy)?
                    .unwrap_or_else(|| FitArgs::default().resources),
            };
        }
        "NodeResourcesBalancedAllocation" => {
            if let Some(r) = resources(&f, args)? {
                p.balanced_resources = r;
            }
        }
        "InterPodAffinity" => {
            if let Some(w) = args.get("hardPodAffinityWeight") {
                let w = w
                    .as_i64()
                    .filter(|w| (0..=100).contains(w))
                    .ok_or_else(|| {
                        invalid(
                            format!("{f}.hardPodAffinityWeight"),
                            "must be an integer in the range [0, 100]",
                        )
                    })?;
                p.hard_pod_affinity_weight = w;
            }
        }
        "PodTopologySpread" => match args.get("defaultingType").and_then(|v| v.as_str()) {
            None | Some("System") => p.system_default_spreading = true,
            Some("List") => p.system_default_spreading = false,
            Some(other) => {
                return Err(invalid(
                    format!("{f}.defaultingType"),
                    format!("unsupported {other:?}, want System or List"),
                ))
            }
        },
        other => {
            plugin_name(&format!("{field}.name"), other)?;
        }
    }
    Ok(())
}

fn shape(field: &str, strategy: &serde_json::Value) -> Result<Vec<(i64, i64)>, ConfigError> {
    let points = strategy
        .pointer("/requestedToCapacityRatio/shape")
        .and_then(|s| s.as_array())
        .ok_or_else(|| {
            invalid(
                format!("{field}.requestedToCapacityRatio.shape"),
                "required for RequestedToCapacityRatio",
            )
        })?;
    let mut out = Vec::new();
    for (i, pt) in points.iter().enumerate() {
        let u = pt.get("utilization").and_then(|v| v.as_i64()).unwrap_or(0);
        let s = pt.get("score").and_then(|v| v.as_i64()).unwrap_or(0);
        let pf = format!("{field}.requestedToCapacityRatio.shape[{i}]");
        if !(0..=100).contains(&u) || !(0..=10).contains(&s) {
            return Err(invalid(
                pf,
                "utilization must be in [0, 100] and score in [0, 10]",
            ));
        }
        if out.last().is_some_and(|(pu, _)| *pu >= u) {
            return Err(invalid(
                format!("{pf}.utilization"),
                "utilization values must be sorted in increasing order",
            ));
        }
        out.push((u, s));
    }
    Ok(out)
}

/// `30s`, `500ms`, `1m`, `1m30s`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (num, tail) = rest.split_at(split);
        let n: f64 = num.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let secs = match unit {
            "h" => n * 3600.0,
            "m" => n * 60.0,
            "s" => n,
            "ms" => n / 1e3,
            "us" | "µs" => n / 1e6,
            "ns" => n / 1e9,
            _ => return None,
        };
        total += Duration::from_secs_f64(secs);
        rest = next;
    }
    Some(total)
}

fn resolve_extender(field: &str, e: FileExtender) -> Result<ExtenderConfig, ConfigError> {
    if e.url_prefix.trim().is_empty() {
        return Err(invalid(format!("{field}.urlPrefix"), "must not be empty"));
    }
    let weight = e.weight.unwrap_or(0);
    if e.prioritize_verb.as_deref().is_some_and(|v| !v.is_empty()) && weight <= 0 {
        return Err(invalid(
            format!("{field}.weight"),
            "must have a positive weight applied to it",
        ));
    }
    let http_timeout = match e.http_timeout.as_deref() {
        None => Duration::from_secs(30),
        Some(t) => parse_duration(t).ok_or_else(|| {
            invalid(
                format!("{field}.httpTimeout"),
                format!("invalid duration {t:?}"),
            )
        })?,
    };
    let _ = (e.preempt_verb, e.tls_config); // accepted; preemption through extenders and custom TLS are not supported
    let verb = |v: Option<String>| v.filter(|v| !v.is_empty());
    Ok(ExtenderConfig {
        url_prefix: e.url_prefix.trim_end_matches('/').to_string(),
        filter_verb: verb(e.filter_verb),
        prioritize_verb: verb(e.prioritize_verb),
        bind_verb: verb(e.bind_verb),
        weight,
        enable_https: e.enable_https,
        http_timeout,
        node_cache_capable: e.node_cache_capable,
        managed_resources: e.managed_resources,
        ignorable: e.ignorable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_PROFILES: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
      enabled: [{name: ImageLocality, weight: 5}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 2}]
extenders:
- urlPrefix: http://127.0.0.1:8888/scheduler/
  filterVerb: filter
  prioritizeVerb: prioritize
  bindVerb: bind
  weight: 3
  httpTimeout: 1500ms
  nodeCacheCapable: true
  ignorable: true
"#;

    #[test]
    fn profiles_plugins_and_extenders() {
        let c = SchedulerConfig::parse(TWO_PROFILES).unwrap();
        assert_eq!(c.profiles.len(), 2);
        let packer = c.profile("packer").unwrap();
        assert_eq!(packer.percentage_of_nodes_to_score, Some(30));
        assert!(!packer
            .scores
            .iter()
            .any(|(p, _)| *p == PluginName::NodeResourcesBalancedAllocation));
        assert!(packer.scores.contains(&(PluginName::ImageLocality, 5)));
        assert_eq!(packer.fit.strategy, Strategy::MostAllocated);
        assert_eq!(packer.fit.resources, [(ResourceName::Cpu, 2)]);
        let e = &c.extenders[0];
        assert_eq!(e.url_prefix, "http://127.0.0.1:8888/scheduler");
        assert_eq!(e.http_timeout, Duration::from_millis(1500));
        assert!(e.ignorable && e.node_cache_capable && e.bind_verb.is_some());
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("profiles: [{schedulerName: a, plugins: {score: {enabled: [{name: Nope}]}}}]", "profiles[0].plugins.score.enabled[0].name: unknown plugin \"Nope\""),
            ("percentageOfNodesToScore: 120", "percentageOfNodesToScore: 120 is not in the range [0, 100]"),
            ("profiles: [{schedulerName: a}, {schedulerName: a}]", "profiles[1].schedulerName: duplicate profile \"a\""),
            ("extenders: [{urlPrefix: 'http://x', prioritizeVerb: p}]", "extenders[0].weight: must have a positive weight applied to it"),
            ("extenders: [{urlPrefix: 'http://x', httpTimeout: soon}]", "extenders[0].httpTimeout: invalid duration \"soon\""),
            ("profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: Random}}}]}]", "profiles[0].pluginConfig[0].args.scoringStrategy.type: unsupported scoring strategy \"Random\""),
            ("profiles: [{plugins: {filter: {enabled: [{name: ImageLocality}]}}}]", "profiles[0].plugins.filter: plugin \"ImageLocality\" does not extend filter"),
        ];
        for (text, want) in cases {
            let err = SchedulerConfig::parse(text).unwrap_err().to_string();
            assert_eq!(err, format!("scheduler config: {want}"), "{text}");
        }
        let unknown = SchedulerConfig::parse("profiles: [{schedulerName: a, plugin: {}}]")
            .unwrap_err()
            .to_string();
        assert!(
            unknown.contains("profiles[0]") && unknown.contains("unknown field `plugin`"),
            "{unknown}"
        );
    }

    #[test]
    fn empty_file_is_the_default_profile() {
        let c = SchedulerConfig::parse("{}").unwrap();
        assert_eq!(c.profiles[0].scheduler_name, DEFAULT_SCHEDULER_NAME);
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
    }
}
