#pragma once
#include "sim/graph/task.h"
#include "sim/core/error.h"
