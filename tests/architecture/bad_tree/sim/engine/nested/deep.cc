#include <sim/graph/task.h>
#include "../engine.h"
