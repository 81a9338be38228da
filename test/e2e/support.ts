import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { Sandbox, waitFor } from '../sandbox/sandbox.js';

export { waitFor };

const execFileAsync = promisify(execFile);

/** The running sandbox (the root hooks have started it). */
export const sandbox = new Sandbox();

/** Runs the sandbox's kubectl against a cluster; resolves with stdout, rejects with stderr. */
export async function kubectl(cluster: string, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(sandbox.kubectlPath, ['--kubeconfig', sandbox.kubeconfigPath, '--context', cluster, ...args], { maxBuffer: 64 << 20 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; code?: number; stdout?: string };
    const wrapped = new Error(`kubectl ${args.join(' ')} on ${cluster} failed (exit ${e.code}): ${e.stderr ?? err}`) as Error & { exitCode?: number; stdout?: string; stderr?: string };
    wrapped.exitCode = e.code;
    wrapped.stdout = e.stdout;
    wrapped.stderr = e.stderr;
    throw wrapped;
  }
}

/** kubectl with data on stdin. */
export function kubectlStdin(cluster: string, stdin: string, ...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((res) => {
    const child = execFile(sandbox.kubectlPath, ['--kubeconfig', sandbox.kubeconfigPath, '--context', cluster, ...args], (err, stdout, stderr) =>
      res({ stdout, stderr, code: err ? ((err as { code?: number }).code ?? 1) : 0 }),
    );
    child.stdin!.end(stdin);
  });
}

export function apply(cluster: string, yaml: string): Promise<string> {
  return sandbox.applyYaml(cluster, yaml);
}

/** Parsed `kubectl get -o json`. */
export async function getJson<T = any>(cluster: string, ...args: string[]): Promise<T> {
  return JSON.parse(await kubectl(cluster, 'get', ...args, '-o', 'json')) as T;
}

/** A KubeConfig for one sandbox cluster (admin). */
export function kubeConfigFor(cluster: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfigPath);
  kc.setCurrentContext(cluster);
  return kc;
}

/** A fresh namespace name for a test, so tests never share objects. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}
