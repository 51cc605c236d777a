// The JSON Schema shipped in config/routinely.schema.json, generated from the zod schema so the
// editor completion and the validator can never disagree (a test checks the committed copy).

import * as z from 'zod/mini';
import { configSchema, taskFileSchema } from './schema.js';

export function configJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(configSchema, { target: 'draft-2020-12', io: 'input' }),
    $id: 'https://routinely.dev/schema/routinely.schema.json',
    title: 'routinely.json',
    description: 'routinely project configuration: the exec lock, exec tasks and cron routines.',
  };
}

export function taskFileJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(taskFileSchema, { target: 'draft-2020-12', io: 'input' }),
    title: 'routinely task file',
    description: 'One exec task, or an array of exec tasks, as in exec.tasks of routinely.json.',
  };
}
