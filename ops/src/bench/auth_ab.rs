//! `--auth-ab`: what access control costs, in one run. W2's sweep runs at each rate on fresh
//! targets alternately without and with access control (off-on, then on-off, and so on, so
//! neither side always goes first), and the table sets the two sides' medians beside each
//! other as ratios, with each side's edge: the highest rate most of its runs sustained.

use super::target::TargetSpec;
use super::{header, BenchArgs, Plan, SweepPoint};
use super::{median, print_columns, print_sweep, progress, run_sweep_on_fresh_target};

/// The two sides' names in the tables.
const OFF: &str = "baton";
const ON: &str = "baton+auth";

/// Runs the alternating sweep and prints it. A sweep is meant to pass the edge, so work
/// unfinished at a rate is a finding, not a failure of the run.
pub(super) fn run(spec: &TargetSpec, plan: &Plan, args: &BenchArgs) -> anyhow::Result<()> {
    let mut points = Vec::new();
    for &rate in &plan.sweep {
        let one_rate = Plan {
            sweep: vec![rate],
            ..plan.clone()
        };
        for round in 0..plan.repeat {
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for auth in order {
                progress(format!(
                    "{rate}/s, round {}, access control {}",
                    round + 1,
                    if auth { "on" } else { "off" }
                ));
                for mut p in run_sweep_on_fresh_target(&spec.with_auth(auth), &one_rate, args)? {
                    p.system = if auth { ON } else { OFF }.into();
                    points.push(p);
                }
            }
        }
    }
    print_sweep(&points, plan.p99_bound_ms);
    print_pairs(&points, plan);
    Ok(())
}

/// Per rate: each side's median CPU per 1,000 steps and p99, their ratios (on / off), and how
/// many of each side's runs were sustainable; then each side's edge.
fn print_pairs(points: &[SweepPoint], plan: &Plan) {
    let mut cells = vec![header(&[
        "rate/s",
        "cpu_ms/1k off",
        "cpu_ms/1k on",
        "on/off",
        "p99_ms off",
        "p99_ms on",
        "on/off",
        "sustained off",
        "sustained on",
    ])];
    let mut edges = [(OFF, None), (ON, None)];
    for &rate in &plan.sweep {
        let side = |system: &str| -> Vec<&SweepPoint> {
            points
                .iter()
                .filter(|p| p.system == system && p.rate == rate)
                .collect()
        };
        let (off, on) = (side(OFF), side(ON));
        let cpu = |s: &[&SweepPoint]| median(s.iter().filter_map(|p| p.m.cpu_per_k).collect());
        let p99 = |s: &[&SweepPoint]| median(s.iter().map(|p| p.m.p99_ms).collect());
        let held = |s: &[&SweepPoint]| {
            s.iter()
                .filter(|p| p.sustainable(plan.p99_bound_ms))
                .count()
        };
        cells.push(vec![
            format!("{rate}"),
            format!("{:.0}", cpu(&off)),
            format!("{:.0}", cpu(&on)),
            ratio(cpu(&on), cpu(&off)),
            format!("{:.2}", p99(&off)),
            format!("{:.2}", p99(&on)),
            ratio(p99(&on), p99(&off)),
            format!("{}/{}", held(&off), off.len()),
            format!("{}/{}", held(&on), on.len()),
        ]);
        for (edge, sustained) in edges
            .iter_mut()
            .zip([held(&off) * 2 > off.len(), held(&on) * 2 > on.len()])
        {
            if sustained {
                edge.1 = Some(rate);
            }
        }
    }
    println!();
    println!(
        "Access control off and on, alternating runs on fresh targets (medians; on/off as ratios)"
    );
    print_columns(&cells);
    println!();
    for (system, edge) in edges {
        match edge {
            Some(rate) => {
                println!("  {system}: edge {rate}/s (the highest rate most of its runs sustained)")
            }
            None => println!("  {system}: no rate was sustained by most of its runs"),
        }
    }
    if let [(_, Some(off)), (_, Some(on))] = edges {
        println!("  edge on/off: {}", ratio(on, off));
    }
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.3}", a / b)
    } else {
        "-".into()
    }
}
