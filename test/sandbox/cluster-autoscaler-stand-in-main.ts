import { ClusterAutoscalerStandIn } from './cluster-autoscaler-stand-in.js';

/**
 * TEST FIXTURE entry point: `node --import tsx cluster-autoscaler-stand-in-main.ts
 * --kubeconfig=<file> [--scan-interval-ms=N]`, started by the sandbox (`up --autoscaler <cluster>`).
 */
function main(argv: string[]): void {
  const flag = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const kubeconfig = flag('kubeconfig');
  if (!kubeconfig) {
    console.error('usage: cluster-autoscaler-stand-in-main.ts --kubeconfig=<file> [--scan-interval-ms=2000]');
    process.exit(2);
  }
  const standIn = new ClusterAutoscalerStandIn(kubeconfig, Number(flag('scan-interval-ms') ?? 2000), (line) => console.log(`cluster-autoscaler-stand-in: ${line}`));
  standIn.start();
  for (const s of ['SIGTERM', 'SIGINT'] as const) process.once(s, () => process.exit(0));
}

main(process.argv.slice(2));
