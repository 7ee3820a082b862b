#pragma once
#include "sim/graph/task.h"
