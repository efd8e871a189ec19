// The package as an ES module imports it: by name and as a namespace (see exercise.ts).
import {
  ThreadContextManager, ThreadSpanProcessor, attributeKeyMap, clearSpanContext, droppedAttributeCount, enableJitNames, getFrameSpanContext,
  getSpanContext, jitNamesStatus, layout, nodejsSchemaInfo, processContextInfo, publishProcessContext, recordView, register,
  registerAttributeKeys,
  setAttribute, setSpanContext, threadInfo, traceActive,
} from 'otel-thread-ctx';
import * as threadCtx from 'otel-thread-ctx';
import { exercise } from './exercise.js';
import type { Api } from './exercise.js';

const named: Api = {
  ThreadContextManager, ThreadSpanProcessor, attributeKeyMap, clearSpanContext, droppedAttributeCount, enableJitNames, getFrameSpanContext,
  getSpanContext, jitNamesStatus, layout, nodejsSchemaInfo, processContextInfo, publishProcessContext, recordView, register,
  registerAttributeKeys,
  setAttribute, setSpanContext, threadInfo, traceActive,
};
for (const [name, value] of Object.entries(named)) {
  if (value !== threadCtx[name as keyof Api]) throw new Error(`import { ${name} } is not the namespace's ${name}`);
}
await exercise(named);
