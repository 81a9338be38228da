import { ApiException, type CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { expect } from 'chai';
import { readClusterClientCa } from '../../../../provider/kubelet/client-ca.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

/** A CoreV1Api that answers readNamespacedConfigMap only, recording what it was asked. */
function core(answer: () => Promise<V1ConfigMap>): { api: CoreV1Api; asked: unknown[] } {
  const asked: unknown[] = [];
  const api = {
    readNamespacedConfigMap: (req: unknown) => {
      asked.push(req);
      return answer();
    },
  } as unknown as CoreV1Api;
  return { api, asked };
}

describe('readClusterClientCa', () => {
  it("reads the apiserver's client CA from kube-system/extension-apiserver-authentication", async () => {
    const c = core(async () => ({ data: { 'client-ca-file': PEM, 'requestheader-client-ca-file': 'other' } }));
    expect(await readClusterClientCa(c.api)).to.deep.equal({ pem: PEM });
    expect(c.asked).to.deep.equal([{ name: 'extension-apiserver-authentication', namespace: 'kube-system' }]);
  });

  const failures: [string, () => Promise<V1ConfigMap>, RegExp][] = [
    ['no client CA published', async () => ({ data: { 'requestheader-client-ca-file': PEM } }), /has no client-ca-file \(the apiserver runs without --client-ca-file\)/],
    ['a value that is no certificate', async () => ({ data: { 'client-ca-file': 'garbage' } }), /has no client-ca-file/],
    [
      'no right to read it',
      async () => Promise.reject(new ApiException(403, 'Forbidden', '{"kind":"Status","message":"configmaps is forbidden"}', {})),
      /forbidden: bind the Role extension-apiserver-authentication-reader in kube-system/,
    ],
    [
      'no such ConfigMap',
      async () => Promise.reject(new ApiException(404, 'NotFound', '{"kind":"Status","message":"not found"}', {})),
      /^reading ConfigMap kube-system\/extension-apiserver-authentication: not found$/,
    ],
  ];
  for (const [what, answer, reason] of failures) {
    it(`says why there is no CA: ${what}`, async () => {
      const got = await readClusterClientCa(core(answer).api);
      expect(got).to.have.property('reason').that.matches(reason);
      expect(got).to.not.have.property('pem');
    });
  }
});
