import { parseAllDocuments, stringify } from 'yaml';

/**
 * Kueue in the sandbox (`up --kueue`): what its manager needs in the source cluster, built from
 * the files that `build.sh kueue` copies out of its module. Pure functions of those files; the
 * sandbox applies what they return.
 *
 * The manager runs with Kueue's internal certificate management, as its default install does:
 * it makes its own CA and serving certificate for `kueue-webhook-service.kueue-system.svc`,
 * keeps them in Secret `kueue-webhook-server-cert`, and puts its CA in its webhook
 * configurations and in the conversion webhooks of five CRDs. Out of cluster, the Service it
 * names is of type ExternalName `127.0.0.1`: the apiserver dials that address at the port its
 * reference gives, and verifies the certificate for the Service's name. With certificate
 * management off, the manager reads its metrics certificate from a path fixed in its code
 * (`/etc/kueue/metrics/certs`); on, the metrics server makes its own.
 */

/** Kueue's namespace and the names its manager looks for there (its defaults). */
export const KUEUE_NAMESPACE = 'kueue-system';
export const KUEUE_SERVICE_ACCOUNT = 'kueue-controller-manager';
export const KUEUE_WEBHOOK_SERVICE = 'kueue-webhook-service';
export const KUEUE_WEBHOOK_SECRET = 'kueue-webhook-server-cert';

/** The CRDs whose conversion webhook Kueue's install turns on (config/components/crd/kustomization.yaml), and its certificate rotator fills in. */
export const KUEUE_CONVERTED_CRDS = ['localqueues', 'clusterqueues', 'cohorts', 'workloads', 'multikueueclusters'].map((r) => `${r}.kueue.x-k8s.io`);

/** The ports of the manager's three servers, all on 127.0.0.1. */
export interface KueuePorts {
  webhook: number;
  metrics: number;
  health: number;
}

const service = (port: number, path: string) => ({ namespace: KUEUE_NAMESPACE, name: KUEUE_WEBHOOK_SERVICE, path, port });

/**
 * One CRD of `crd/bases`, with the conversion webhook of Kueue's install where it has one
 * (`patches/webhook_in_*.yaml`), pointing at the webhook Service on `port`. Its caBundle is left
 * to the manager, so that applying it again takes nothing away.
 */
export function kueueCrd(crdYaml: string, port: number): string {
  const crd = parseAllDocuments(crdYaml)[0]!.toJS() as { metadata: { name: string }; spec: Record<string, unknown> };
  if (KUEUE_CONVERTED_CRDS.includes(crd.metadata.name)) {
    crd.spec.conversion = { strategy: 'Webhook', webhook: { clientConfig: { service: service(port, '/convert') }, conversionReviewVersions: ['v1'] } };
  }
  return stringify(crd);
}

/**
 * Kueue's webhook configurations (`webhook/manifests.yaml`) as its install names them, kept to
 * the webhooks of the integrations the sandbox turns on: Kueue's own kinds and batch Jobs. The
 * others (pods, Deployments, JobSets…) would refuse every such object: the manager serves no
 * path for an integration that is off, and every webhook fails closed.
 */
export function kueueWebhookConfigurations(manifestsYaml: string, port: number): string {
  type Webhook = { clientConfig: { service: { path: string } }; rules: { apiGroups: string[]; resources: string[] }[] };
  const kept = (w: Webhook) => w.rules.some((r) => r.apiGroups.includes('kueue.x-k8s.io') || (r.apiGroups.includes('batch') && r.resources.includes('jobs')));
  return parseAllDocuments(manifestsYaml)
    .map((d) => d.toJS() as { metadata: { name: string }; webhooks: Webhook[] } | null)
    .filter((c) => c !== null)
    .map((c) =>
      stringify({
        ...c,
        metadata: { name: `kueue-${c.metadata.name}` },
        webhooks: c.webhooks.filter(kept).map((w) => ({ ...w, clientConfig: { service: service(port, w.clientConfig.service.path) } })),
      }),
    )
    .join('---\n');
}

/** The kustomization that applies Kueue's RBAC (`rbac/`, copied to `rbacDir`, relative to the kustomization) as its install does: in its namespace, every name prefixed. */
export function kueueRbacKustomization(rbacDir: string): string {
  return stringify({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', namespace: KUEUE_NAMESPACE, namePrefix: 'kueue-', resources: [rbacDir] });
}

/**
 * What Kueue's install puts in its namespace besides RBAC, out of cluster: the namespace, the
 * empty Secret its certificate rotator fills (its RBAC may update Secrets, not create them), and
 * the webhook Service as an ExternalName of 127.0.0.1.
 */
export function kueueNamespaceYaml(port: number): string {
  return `apiVersion: v1
kind: Namespace
metadata: {name: ${KUEUE_NAMESPACE}}
---
apiVersion: v1
kind: Secret
metadata: {name: ${KUEUE_WEBHOOK_SECRET}, namespace: ${KUEUE_NAMESPACE}}
---
apiVersion: v1
kind: Service
metadata: {name: ${KUEUE_WEBHOOK_SERVICE}, namespace: ${KUEUE_NAMESPACE}}
spec: {type: ExternalName, externalName: 127.0.0.1, ports: [{name: https, port: ${port}}]}
`;
}

/**
 * The manager's Configuration: its servers on 127.0.0.1, its certificates in `certDir`, one
 * process (no leader election), batch Jobs only, and the visibility server off (it keeps its
 * certificates in `/visibility`, a path fixed in its code).
 */
export function kueueConfiguration(ports: KueuePorts, certDir: string): string {
  return stringify({
    apiVersion: 'config.kueue.x-k8s.io/v1beta2',
    kind: 'Configuration',
    namespace: KUEUE_NAMESPACE,
    health: { healthProbeBindAddress: `127.0.0.1:${ports.health}` },
    metrics: { bindAddress: `127.0.0.1:${ports.metrics}` },
    webhook: { host: '127.0.0.1', port: ports.webhook, certDir },
    leaderElection: { leaderElect: false },
    internalCertManagement: { enable: true, webhookServiceName: KUEUE_WEBHOOK_SERVICE, webhookSecretName: KUEUE_WEBHOOK_SECRET },
    integrations: { frameworks: ['batch/job'] },
    featureGates: { VisibilityOnDemand: false },
  });
}
