// Subscription filters (CEL, over the Filterable fields only) and field selection, compiled once
// per subscription version and run per event in the workers.

export {
  type CelEnvironment,
  type CelEnvironmentSpec,
  celEnvironment,
  type VariableKind,
  type VariableLeaf,
} from './cel-environment.ts';
export {
  type CompiledExpression,
  compileExpression,
  type Expectation,
} from './compile-expression.ts';
export {
  type CompiledFilter,
  type CompileFilterOptions,
  compileFilter,
} from './compile-filter.ts';
export {
  compileProjection,
  compileSpanProjection,
  MAX_SELECTED_FIELDS,
  type Projection,
  type SpanProjection,
  selectableNames,
} from './compile-projection.ts';
export {
  FieldSelectionError,
  FilterError,
  type FilterErrorCode,
  type SourcePosition,
} from './filter-error.ts';
export { FILTER_LIMITS } from './filter-limits.ts';
