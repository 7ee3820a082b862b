#pragma once
#include "sim/core/error.h"
#include <sim/engine/engine.h>
