// Arch.g4 - grammar of archc's `.arch` architecture description language.
//
// The language reference is docs/language.md. Statements need no separator:
// a statement starts with a keyword or with `name =`, and expressions never
// juxtapose, so a newline can end a statement without being a token.
// `for i in 0 .. n @ "scope" { ... }` parses the scope as part of the upper
// bound (a scope postfix); the AST builder moves it onto the loop.
grammar Arch;

file : item* EOF ;

item
  : importDecl
  | archDecl
  | defDecl
  ;

importDecl : IMPORT path=STRING ';'? ;

archDecl
  : ARCH name=ID (MATCHES STRING (',' STRING)*)? '{' archMember* '}'
  ;

archMember
  : configBlock
  | defDecl
  | modelDecl
  ;

configBlock : CONFIG '{' configEntry* '}' ;

configEntry
  : name=ID ':' typeRef ('=' value=expr)? (ALIAS STRING (',' STRING)*)? ';'?   # ConfigField
  | LET name=ID (':' typeRef)? '=' value=expr ';'?                             # ConfigLet
  | CHECK cond=expr (',' message=STRING)? ';'?                                 # ConfigCheck
  ;

typeRef : name=ID ('<' elem=typeRef '>')? optional='?'? ;

defDecl : DEF name=ID '(' paramList? ')' body=block ;

paramList : param (',' param)* ','? ;

param : name=ID (':' typeRef)? ('=' value=expr)? ;

modelDecl
  : MODEL '(' inputList? ')' '->' '(' ID (',' ID)* ')' body=block
  ;

inputList : modelInput (',' modelInput)* ','? ;

modelInput : name=ID ':' dtype=ID '[' (expr (',' expr)*)? ']' ;

block : '{' stmt* '}' ;

stmt
  : ID (',' ID)* '=' value=expr ';'?                                  # AssignStmt
  | target=ID op=('+=' | '-=' | '*=') value=expr ';'?                 # AugAssignStmt
  | FOR var=ID IN lo=expr '..' hi=expr body=block                     # ForStmt
  | ifChain                                                           # IfStmt
  | RETURN expr (',' expr)* ';'?                                      # ReturnStmt
  | ERROR message=STRING ';'?                                         # ErrorStmt
  | CHECK cond=expr (',' message=STRING)? ';'?                        # CheckStmt
  ;

ifChain : IF cond=expr then=block (ELSE (elseIf=ifChain | otherwise=block))? ;

// Expressions. Binary operators form one flat chain; the AST builder
// applies precedence and associativity (docs/language.md has the table), so
// a leaf expression enters 4 rules instead of one per precedence level.
expr : chain ('?' then=expr ':' otherwise=expr)? ;

chain : unary (binaryOp unary)* ;

binaryOp
  : '*' | '/' | '//' | '%'
  | '+' | '-'
  | '<' | '<=' | '>' | '>=' | '==' | '!='
  | NOT? IN
  | ANDOP | AND
  | OROP | OR
  ;

unary
  : op=('-' | '!' | NOT) unary   # PrefixUnary
  | postfix                      # PostfixUnary
  ;

postfix : primary postfixOp* ;

postfixOp
  : '.' member=ID                # MemberOp
  | '(' argList? ')'             # CallOp
  | '[' index=expr ']'           # IndexOp
  | '@' scope=STRING             # ScopeOp
  ;

primary
  : INT                                        # IntLit
  | FLOAT                                      # FloatLit
  | STRING                                     # StringLit
  | (TRUE | FALSE)                             # BoolLit
  | NONE                                       # NoneLit
  | ID                                         # NameRef
  | '(' expr ')'                               # ParenExpr
  | '[' (expr (',' expr)* ','?)? ']'           # ListLit
  | FN '(' paramList? ')' body=block           # FnLit
  ;

argList : arg (',' arg)* ','? ;

arg : (name=ID ':')? value=expr ;

// Keywords.
IMPORT  : 'import' ;
ARCH    : 'arch' ;
MATCHES : 'matches' ;
CONFIG  : 'config' ;
ALIAS   : 'alias' ;
LET     : 'let' ;
CHECK   : 'check' ;
DEF     : 'def' ;
MODEL   : 'model' ;
FOR     : 'for' ;
IN      : 'in' ;
IF      : 'if' ;
ELSE    : 'else' ;
RETURN  : 'return' ;
ERROR   : 'error' ;
FN      : 'fn' ;
TRUE    : 'true' ;
FALSE   : 'false' ;
NONE    : 'none' ;
AND     : 'and' ;
OR      : 'or' ;
NOT     : 'not' ;
OROP    : '||' ;
ANDOP   : '&&' ;

ID     : [a-zA-Z_] [a-zA-Z0-9_]* ;
FLOAT  : [0-9]+ '.' [0-9]+ EXPONENT? | [0-9]+ EXPONENT ;
INT    : [0-9]+ ;
STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* '"' ;

fragment EXPONENT : [eE] [+-]? [0-9]+ ;

LINE_COMMENT  : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS            : [ \t\r\n\f]+ -> skip ;
