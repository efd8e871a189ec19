// What the main thread and the report worker say to each other.
export type Job =
  | { kind: 'render'; id: number; ms: number; carrier: Record<string, string> }
  | { kind: 'shutdown' };

export interface Reply {
  id: number;
  rows: number;
  threadId: number;
}
