/** Where reconcilers record Kubernetes Events (the EventRecorder in production, a fake in tests). */
export interface EventSink {
  record(obj: { kind: string; apiVersion: string; metadata: { name?: string; namespace?: string; uid?: string } }, type: 'Normal' | 'Warning', reason: string, message: string): void;
}
