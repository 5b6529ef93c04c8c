#include "emit/Lower.h"
