// Regenerates config/*.schema.json from the zod schema (run `npm run gen:schema`).
import { writeFileSync } from 'node:fs';
import { configJsonSchema, taskFileJsonSchema } from '../dist/index.js';

writeFileSync('config/routinely.schema.json', `${JSON.stringify(configJsonSchema(), null, 2)}\n`);
writeFileSync('config/task.schema.json', `${JSON.stringify(taskFileJsonSchema(), null, 2)}\n`);
console.log('wrote config/routinely.schema.json and config/task.schema.json');
