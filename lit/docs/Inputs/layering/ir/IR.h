#include "emit/lowering/Lower.h"
