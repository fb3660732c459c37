//! The HorizontalPodAutoscaler controller's algorithm, as upstream's
//! `pkg/controller/podautoscaler`: the replica calculator and scaling behavior, pure.

pub mod behavior;
pub mod calculator;
