// The one way every driver here runs its plan: reads {"base", "concurrency",
// "cases"} from stdin, runs the cases `concurrency` at a time through
// `runCase(base, case)`, and prints what each saw, keyed by case id.
export function runPlan(runCase) {
  const main = async () => {
    let input = '';
    for await (const part of process.stdin) input += part;
    const plan = JSON.parse(input);
    const out = {};
    const queue = [...plan.cases];
    const worker = async () => {
      for (let c = queue.shift(); c; c = queue.shift()) {
        out[c.id] = await runCase(plan.base, c);
      }
    };
    await Promise.all(Array.from({ length: plan.concurrency ?? 6 }, worker));
    process.stdout.write(JSON.stringify(out));
  };
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}

// Runs `run()`, recording a throw in `obs` (`ok: false`, `error` as the
// driver's `describe` reads its SDK's errors).
export async function observe(obs, describe, run) {
  try {
    await run();
  } catch (e) {
    obs.ok = false;
    obs.error = describe(e);
  }
}
