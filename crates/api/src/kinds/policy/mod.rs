pub mod pod_disruption_budget;
