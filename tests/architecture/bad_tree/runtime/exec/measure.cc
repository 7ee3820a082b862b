#include "runtime/exec/measure.h"
#include "sim/engine/engine.h"
