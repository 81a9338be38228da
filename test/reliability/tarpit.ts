import { createServer, type AddressInfo, type Socket } from 'node:net';
import { apply, kubectl } from '../e2e/support.js';

/**
 * A server on 127.0.0.1 that accepts connections and never answers, and what makes it a Target
 * of c1: the scenarios' unreachable target that no timeout of a connect can tell from a slow one.
 */
export class Tarpit {
  /** Connections it holds, in the order they came. */
  readonly held: Socket[] = [];
  private readonly server = createServer((socket) => {
    this.held.push(socket);
    socket.on('error', () => undefined);
  });

  listen(): Promise<void> {
    return new Promise((res) => this.server.listen(0, '127.0.0.1', res));
  }

  /** Creates Target `<ns>/tarpit`, whose kubeconfig Secret points at this server. */
  async addTarget(ns: string): Promise<void> {
    const port = (this.server.address() as AddressInfo).port;
    const kubeconfig = `apiVersion: v1\nkind: Config\nclusters: [{name: t, cluster: {server: "https://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]\nusers: [{name: t, user: {token: t}}]\ncontexts: [{name: t, context: {cluster: t, user: t}}]\ncurrent-context: t\n`;
    await kubectl('c1', 'create', 'secret', 'generic', 'tarpit', '-n', ns, `--from-literal=config=${kubeconfig}`);
    await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: tarpit, namespace: ${ns}}\nspec: {kubeconfigSecret: {name: tarpit}}\n`);
  }

  close(): void {
    for (const s of this.held) s.destroy();
    this.server.close();
  }
}
